//! A small, defensive reader for zip archives: the container of `torch.save` files, Lightning
//! checkpoints and `.npz` arrays. It reads stored and deflated entries (with zip64 sizes), checks
//! every offset against the buffer and every entry's CRC-32, and never trusts a declared size
//! further than the bytes that are really there.

use crate::{InteropError, Result};
use std::io::Read;

const EOCD_SIG: u32 = 0x0605_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const ZIP64_EOCD_SIG: u32 = 0x0606_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;

/// One file of the archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZipEntry {
    pub name: String,
    method: u16,
    crc: u32,
    compressed: u64,
    size: u64,
    local_offset: u64,
}

/// An archive held in memory.
#[derive(Debug)]
pub struct ZipArchive<'a> {
    bytes: &'a [u8],
    entries: Vec<ZipEntry>,
}

fn err(reason: impl Into<String>) -> InteropError {
    InteropError::Zip { reason: reason.into() }
}

/// The `N` bytes at offset `at`. Offsets come from the file (a zip64 record or an entry may point
/// anywhere), so the end is computed without overflow.
fn field<const N: usize>(b: &[u8], at: usize) -> Result<[u8; N]> {
    at.checked_add(N).and_then(|end| b.get(at..end)).and_then(|s| s.try_into().ok()).ok_or_else(|| err(format!("truncated at byte {at}")))
}

fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    field(b, at).map(u16::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    field(b, at).map(u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> Result<u64> {
    field(b, at).map(u64::from_le_bytes)
}

fn to_usize(v: u64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| err(format!("{what} {v} is too large")))
}

/// Whether the bytes start like a zip archive.
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

impl<'a> ZipArchive<'a> {
    /// Reads the central directory of an archive.
    pub fn new(bytes: &'a [u8]) -> Result<ZipArchive<'a>> {
        // The end-of-central-directory record is in the last 22 + 65535 bytes (its comment can be
        // that long); search backwards for its signature.
        let min = bytes.len().saturating_sub(22 + 65_535);
        let eocd = (min..bytes.len().saturating_sub(21))
            .rev()
            .find(|&i| u32_at(bytes, i).ok() == Some(EOCD_SIG))
            .ok_or_else(|| err("no end-of-central-directory record: the file is truncated or not a zip archive"))?;
        let mut count = u16_at(bytes, eocd + 10)? as u64;
        let mut cd_size = u32_at(bytes, eocd + 12)? as u64;
        let mut cd_offset = u32_at(bytes, eocd + 16)? as u64;
        if eocd >= 20 && u32_at(bytes, eocd - 20)? == ZIP64_LOCATOR_SIG {
            let z64 = to_usize(u64_at(bytes, eocd - 20 + 8)?, "zip64 record offset")?;
            if u32_at(bytes, z64)? != ZIP64_EOCD_SIG {
                return Err(err("zip64 locator points at no zip64 end record"));
            }
            count = u64_at(bytes, z64 + 32)?;
            cd_size = u64_at(bytes, z64 + 40)?;
            cd_offset = u64_at(bytes, z64 + 48)?;
        }
        let start = to_usize(cd_offset, "central directory offset")?;
        let end = start.checked_add(to_usize(cd_size, "central directory size")?).filter(|&e| e <= bytes.len());
        if end.is_none() {
            return Err(err(format!("central directory ({cd_size} bytes at {cd_offset}) lies outside the {} byte file", bytes.len())));
        }
        // Each central record takes at least 46 bytes, which bounds a hostile count.
        if count > cd_size / 46 + 1 {
            return Err(err(format!("central directory claims {count} entries in {cd_size} bytes")));
        }
        let mut entries = Vec::with_capacity(count as usize);
        let mut at = start;
        for _ in 0..count {
            if u32_at(bytes, at)? != CENTRAL_SIG {
                return Err(err(format!("bad central directory record at byte {at}")));
            }
            let flags = u16_at(bytes, at + 8)?;
            let method = u16_at(bytes, at + 10)?;
            let crc = u32_at(bytes, at + 16)?;
            let mut compressed = u32_at(bytes, at + 20)? as u64;
            let mut size = u32_at(bytes, at + 24)? as u64;
            let name_len = u16_at(bytes, at + 28)? as usize;
            let extra_len = u16_at(bytes, at + 30)? as usize;
            let comment_len = u16_at(bytes, at + 32)? as usize;
            let mut local_offset = u32_at(bytes, at + 42)? as u64;
            let name_bytes = bytes.get(at + 46..at + 46 + name_len).ok_or_else(|| err("truncated entry name"))?;
            let name = String::from_utf8_lossy(name_bytes).into_owned();
            if flags & 1 != 0 {
                return Err(err(format!("entry `{name}` is encrypted")));
            }
            let extra = bytes.get(at + 46 + name_len..at + 46 + name_len + extra_len).ok_or_else(|| err("truncated extra field"))?;
            // The zip64 extra field holds, in order, only the values whose 32-bit field is saturated.
            let mut e = 0;
            while e + 4 <= extra.len() {
                let id = u16_at(extra, e)?;
                let len = u16_at(extra, e + 2)? as usize;
                if id == 1 {
                    let mut p = e + 4;
                    for v in [&mut size, &mut compressed, &mut local_offset] {
                        if *v == 0xFFFF_FFFF {
                            *v = u64_at(extra, p)?;
                            p += 8;
                        }
                    }
                }
                e += 4 + len;
            }
            entries.push(ZipEntry { name, method, crc, compressed, size, local_offset });
            at += 46 + name_len + extra_len + comment_len;
        }
        Ok(ZipArchive { bytes, entries })
    }

    /// The entries in directory order.
    pub fn entries(&self) -> &[ZipEntry] {
        &self.entries
    }

    /// The entry called `name`.
    pub fn find(&self, name: &str) -> Option<&ZipEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The uncompressed content of an entry, checked against its CRC-32.
    pub fn read(&self, entry: &ZipEntry) -> Result<Vec<u8>> {
        let at = to_usize(entry.local_offset, "entry offset")?;
        if u32_at(self.bytes, at)? != LOCAL_SIG {
            return Err(err(format!("entry `{}`: no local header at byte {at}", entry.name)));
        }
        let name_len = u16_at(self.bytes, at + 26)? as usize;
        let extra_len = u16_at(self.bytes, at + 28)? as usize;
        let start = at + 30 + name_len + extra_len;
        let len = to_usize(entry.compressed, "entry size")?;
        let raw = start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| err(format!("entry `{}` ({len} bytes at {start}) runs past the end of the file: truncated", entry.name)))?;
        let size = to_usize(entry.size, "entry size")?;
        let data = match entry.method {
            0 => {
                if len != size {
                    return Err(err(format!("stored entry `{}` has sizes {len} and {size}", entry.name)));
                }
                raw.to_vec()
            }
            8 => {
                // Never allocate more than the compressed bytes could possibly inflate to (deflate's
                // best ratio is about 1032:1), whatever the header claims.
                let cap = size.min(len.saturating_mul(1032).saturating_add(64));
                let mut out = Vec::with_capacity(cap);
                flate2::read::DeflateDecoder::new(raw)
                    .take(size as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| InteropError::Inflate { entry: entry.name.clone(), source: e })?;
                if out.len() != size {
                    return Err(err(format!("entry `{}` inflates to {} bytes, its header says {size}", entry.name, out.len())));
                }
                out
            }
            m => return Err(err(format!("entry `{}` uses compression method {m}; only stored and deflate are supported", entry.name))),
        };
        let crc = crc32fast::hash(&data);
        if crc != entry.crc {
            return Err(err(format!("entry `{}` is corrupt (CRC-32 {crc:08x}, expected {:08x})", entry.name, entry.crc)));
        }
        Ok(data)
    }

    /// The content of the entry called `name`.
    pub fn read_named(&self, name: &str) -> Result<Vec<u8>> {
        let e = self.find(name).ok_or_else(|| err(format!("no entry `{name}`")))?;
        self.read(e)
    }
}

/// Writes a zip archive of stored (uncompressed) entries, as `numpy.savez` does: enough for
/// `.npz` reference bundles.
pub fn write_stored(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let offset = out.len() as u32;
        let crc = crc32fast::hash(data);
        let header = |sig: u32, central: bool| {
            let mut h = sig.to_le_bytes().to_vec();
            if central {
                h.extend(20u16.to_le_bytes());
            }
            h.extend(20u16.to_le_bytes());
            h.extend([0u8; 2]); // flags
            h.extend([0u8; 2]); // stored
            h.extend([0u8; 4]); // time, date
            h.extend(crc.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h.extend([0u8; 2]); // extra length
            if central {
                h.extend([0u8; 6]); // comment length, disk, internal attributes
                h.extend([0u8; 4]); // external attributes
                h.extend(offset.to_le_bytes());
            }
            h.extend(name.as_bytes());
            h
        };
        out.extend(header(LOCAL_SIG, false));
        out.extend(*data);
        central.extend(header(CENTRAL_SIG, true));
    }
    let cd_offset = out.len() as u32;
    out.extend(&central);
    out.extend(EOCD_SIG.to_le_bytes());
    out.extend([0u8; 4]);
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(cd_offset.to_le_bytes());
    out.extend([0u8; 2]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_archives_round_trip() {
        let z = write_stored(&[("a.npy", b"hello"), ("dir/b", b"")]);
        let r = ZipArchive::new(&z).unwrap();
        let names: Vec<&str> = r.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a.npy", "dir/b"]);
        assert_eq!(r.read_named("a.npy").unwrap(), b"hello");
        assert_eq!(r.read_named("dir/b").unwrap(), b"");
    }

    #[test]
    fn damaged_archives_are_errors() {
        let z = write_stored(&[("a", b"hello world")]);
        let mut bad = z.clone();
        let at = bad.windows(5).position(|w| w == b"hello").unwrap();
        bad[at] = b'j';
        let e = ZipArchive::new(&bad).unwrap().read_named("a").unwrap_err().to_string();
        assert!(e.contains("corrupt (CRC-32"), "{e}");
        assert!(ZipArchive::new(&z[..z.len() - 5]).unwrap_err().to_string().contains("truncated or not a zip"));
        assert!(ZipArchive::new(b"PK").is_err());
    }
}
