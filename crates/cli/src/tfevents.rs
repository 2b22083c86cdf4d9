//! TensorBoard event files, written by hand: a TFRecord file (each record is its length as a
//! little-endian u64, the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of
//! the data) whose records are `tensorflow.Event` protocol buffers. The first record holds
//! `file_version = "brain.Event:2"`; each further one holds a `Summary` of scalars
//! (`Summary.Value { tag = 1, simple_value = 2 }`), as `torch.utils.tensorboard` writes them.
//! Only the few protobuf fields needed are encoded, in field order with proto3's rule that a
//! zero scalar is left out, so a record is byte for byte what the Python writer produces.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one byte at a time from a table
/// built at compile time.
const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

pub fn crc32c(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| CRC32C_TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8))
}

/// TFRecord's masked CRC: the CRC rotated right by 15 bits plus a constant, so that a CRC of
/// data holding CRCs stays well distributed.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord around `data`.
pub fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A field key: the field number and its wire type (0 varint, 1 fixed64, 2 bytes, 5 fixed32).
fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    key(out, field, 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// What an `Event` carries besides its time and step.
#[derive(Clone, Debug, PartialEq)]
pub enum EventBody<'a> {
    /// `file_version` (field 3): the first record of every file.
    FileVersion(&'a str),
    /// `summary` (field 5) with one `simple_value` per tag.
    Scalars(&'a [(&'a str, f32)]),
}

/// The `Event` message: `wall_time` (1, double), `step` (2, int64), then the body.
pub fn encode_event(wall_time: f64, step: i64, body: &EventBody) -> Vec<u8> {
    let mut out = Vec::new();
    if wall_time != 0.0 {
        key(&mut out, 1, 1);
        out.extend_from_slice(&wall_time.to_le_bytes());
    }
    if step != 0 {
        key(&mut out, 2, 0);
        // int64 is sent as its two's complement in 64 bits.
        varint(&mut out, step as u64);
    }
    match body {
        EventBody::FileVersion(v) => bytes_field(&mut out, 3, v.as_bytes()),
        EventBody::Scalars(values) => {
            let mut summary = Vec::new();
            for (tag, value) in values.iter() {
                let mut v = Vec::new();
                bytes_field(&mut v, 1, tag.as_bytes());
                // `simple_value` sits in a oneof, so it is written even when it is zero.
                key(&mut v, 2, 5);
                v.extend_from_slice(&value.to_le_bytes());
                bytes_field(&mut summary, 1, &v);
            }
            bytes_field(&mut out, 5, &summary);
        }
    }
    out
}

/// The file name TensorBoard's writers use: `events.out.tfevents.<unix seconds>.<host>.<pid>.<n>`.
pub fn event_file_name(unix_seconds: u64, host: &str, pid: u32) -> String {
    format!("events.out.tfevents.{unix_seconds}.{host}.{pid}.0")
}

/// An open event file. Records go through a buffer; [`EventFile::flush`] puts them on disk.
pub struct EventFile {
    path: PathBuf,
    out: BufWriter<File>,
}

impl EventFile {
    /// Creates a new event file in `dir` (created if needed) and writes its version record.
    pub fn create(dir: &Path) -> std::io::Result<EventFile> {
        std::fs::create_dir_all(dir)?;
        let now = wall_time();
        let path = dir.join(event_file_name(now as u64, &host_name(), std::process::id()));
        let mut file = EventFile { out: BufWriter::new(File::create(&path)?), path };
        file.write(&encode_event(now, 0, &EventBody::FileVersion("brain.Event:2")))?;
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the scalars at `step`, stamped with the time now.
    pub fn scalars(&mut self, step: i64, values: &[(&str, f32)]) -> std::io::Result<()> {
        self.write(&encode_event(wall_time(), step, &EventBody::Scalars(values)))
    }

    fn write(&mut self, event: &[u8]) -> std::io::Result<()> {
        self.out.write_all(&record(event))
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }
}

fn wall_time() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// The machine's name for the file name (Linux's kernel name, else `$HOSTNAME`), reduced to
/// characters safe in a file name.
fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().or_else(|| std::env::var("HOSTNAME").ok()).unwrap_or_default();
    let name: String = raw.trim().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')).collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_values() {
        // The check value of CRC-32C (RFC 3720, B.4) and the iSCSI test vectors of 32 zeros/ones.
        for (data, want) in [(b"123456789".to_vec(), 0xE306_9283u32), (vec![0u8; 32], 0x8A91_36AA), (vec![0xffu8; 32], 0x62A8_AB43)] {
            assert_eq!(crc32c(&data), want, "{data:?}");
        }
    }

    #[test]
    fn varints_and_negative_steps() {
        for (v, want) in [(0u64, vec![0u8]), (1, vec![1]), (127, vec![0x7f]), (128, vec![0x80, 1]), (300, vec![0xac, 2])] {
            let mut out = Vec::new();
            varint(&mut out, v);
            assert_eq!(out, want, "{v}");
        }
        let e = encode_event(0.0, -1, &EventBody::FileVersion(""));
        assert_eq!(e[..11], [0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    }

    #[test]
    fn scalar_event_by_hand() {
        // Event{wall_time: 1.5, step: 3, summary: {value: [{tag: "a", simple_value: 2.0}]}}.
        let e = encode_event(1.5, 3, &EventBody::Scalars(&[("a", 2.0)]));
        let mut want = vec![0x09];
        want.extend_from_slice(&1.5f64.to_le_bytes());
        want.extend_from_slice(&[0x10, 3, 0x2a, 10, 0x0a, 8, 0x0a, 1, b'a', 0x15]);
        want.extend_from_slice(&2.0f32.to_le_bytes());
        assert_eq!(e, want);
    }

    /// The events of `scripts/make_tfevents_fixture.py`, which wrote them with TensorBoard's
    /// own writer: every record after the file-version one is byte for byte ours.
    #[test]
    fn records_match_tensorboards_writer() {
        let fixture = include_bytes!("../tests/fixtures/tensorboard/reference.tfevents");
        type Scalars = &'static [(&'static str, f32)];
        let events: [(f64, i64, Scalars); 7] = [
            (1700000001.25, 0, &[("train_loss_step", 2.3125)]),
            (1700000002.5, 1, &[("train_loss_step", 1.5)]),
            (1700000003.75, 300, &[("train_loss_step", 0.0)]),
            (1700000004.0, 301, &[("val_acc_epoch", -1.25)]),
            (1700000005.0, 302, &[("lr-Adam", f32::MAX)]),
            (1700000006.0, 303, &[("train_loss_step", f32::NAN)]),
            (1700000007.0, 304, &[("val_loss_epoch", 0.5), ("epoch", 3.0)]),
        ];
        let mut ours = Vec::new();
        for (t, step, values) in events {
            ours.extend(record(&encode_event(t, step, &EventBody::Scalars(values))));
        }
        // The first record (file version and the writer's source metadata) has a length of its own.
        let first = 16 + u64::from_le_bytes(fixture[..8].try_into().unwrap()) as usize;
        assert_eq!(&fixture[first..], &ours[..]);
        // The file-version record: our encoding is the fixture's without its source metadata
        // (field 10, `R` = 0x52), which sits last.
        let version = encode_event(1_700_000_000.0, 0, &EventBody::FileVersion("brain.Event:2"));
        assert_eq!(&fixture[12..12 + version.len()], &version[..]);
        assert_eq!(fixture[12 + version.len()], 0x52);
    }
}
