//! The checksums that tie a design folder together: `ch emit` writes `SHA256SUMS` (the format
//! of `sha256sum`, so `sha256sum -c SHA256SUMS` checks it too) over `design.json`,
//! `manifest.json`, every Verilog file of `rtl/` and `sim/`, the testbench and the build script. `ch simulate` and
//! `ch synth` refuse a folder whose files are missing, edited, truncated or joined by another
//! Verilog file, with one line naming the file.

use crate::error::{file_cause, file_err, file_msg, Result};
use std::path::Path;

/// The name of the checksum file.
pub const SUMS: &str = "SHA256SUMS";

/// The files of a folder that the checksums cover, relative to it, sorted: `design.json`,
/// `manifest.json`, `build.sh`, `tb/tb.cpp`, every `.v` file of `rtl/` and, when there is one,
/// of `sim/` (the simulation models of instantiated primitives).
fn covered(dir: &Path) -> Result<Vec<String>> {
    let mut files = vec!["build.sh".to_string(), "design.json".into(), "manifest.json".into(), "tb/tb.cpp".into()];
    for sub in ["rtl", "sim"] {
        let folder = dir.join(sub);
        if sub == "sim" && !folder.is_dir() {
            continue;
        }
        for e in std::fs::read_dir(&folder).map_err(|e| file_err(&folder, e))? {
            let p = e.map_err(|e| file_err(&folder, e))?.path();
            if p.extension().is_some_and(|x| x == "v") {
                if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
                    files.push(format!("{sub}/{name}"));
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The text of `SHA256SUMS` for the folder as it is now.
fn sums_text(dir: &Path) -> Result<String> {
    let mut text = String::new();
    for rel in covered(dir)? {
        let p = dir.join(&rel);
        let bytes = std::fs::read(&p).map_err(|e| file_err(&p, e))?;
        text.push_str(&format!("{}  {rel}\n", hex(&sha256(&bytes))));
    }
    Ok(text)
}

/// Writes `SHA256SUMS` of the folder (after every other file of `ch emit`).
pub fn write_sums(dir: &Path) -> Result<()> {
    let text = sums_text(dir)?;
    let p = dir.join(SUMS);
    std::fs::write(&p, text).map_err(|e| file_err(&p, e))
}

/// Checks the folder against its `SHA256SUMS`; the first file that differs, is missing or is
/// not listed is one error naming it.
pub fn check_sums(dir: &Path) -> Result<()> {
    let p = dir.join(SUMS);
    let want = std::fs::read_to_string(&p).map_err(|e| file_cause(&p, "not a folder written by `ch emit` (emit the design again)", e))?;
    let listed: Vec<(&str, &str)> = want.lines().filter_map(|l| l.split_once("  ")).collect();
    let again = " (the folder was edited or damaged; emit the design again)";
    for (sum, rel) in &listed {
        let f = dir.join(rel);
        let bytes = std::fs::read(&f).map_err(|e| file_cause(&f, &format!("listed in {SUMS}{again}"), e))?;
        if hex(&sha256(&bytes)) != *sum {
            return Err(file_msg(&f, format!("differs from its checksum in {SUMS}{again}")));
        }
    }
    for rel in covered(dir)? {
        if !listed.iter().any(|(_, r)| *r == rel) {
            return Err(file_msg(&dir.join(&rel), format!("not listed in {SUMS}{again}")));
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
    0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
    0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
    0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
    0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
    0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256 (FIPS 180-4) of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, v) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_fips_examples() {
        // FIPS 180-4 examples and a two-block message.
        let cases: &[(&[u8], &str)] = &[
            (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
        ];
        for (data, want) in cases {
            assert_eq!(hex(&sha256(data)), *want, "{:?}", String::from_utf8_lossy(data));
        }
    }
}
