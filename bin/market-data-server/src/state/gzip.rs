//! Gzip for the event stream, compressed once for every stream.
//!
//! A gzip body is a 10-byte header, one deflate stream, and an 8-byte
//! trailer: the CRC-32 and the length of what it decompresses to. A deflate
//! stream is a run of blocks. Bytes compressed by a fresh compressor and
//! ended with a sync flush (an empty stored block, which leaves the output
//! on a byte boundary) refer to nothing before them, so they can follow
//! whatever a stream sent before: a push is compressed once ([`Segment`])
//! and every stream that asked for gzip sends the same bytes. A stream keeps
//! only the CRC-32 and length of what it sent ([`GzipStream`]), to end its
//! body properly when the server ends it. A client that goes away needs no
//! end.
//!
//! Bytes made for one stream only (its heartbeats, its filtered events, its
//! replay) are compressed by a compressor of the worker thread's, reset
//! each time, or sent as a stored (uncompressed) block when they are too
//! short to be worth the reset.

use std::cell::RefCell;

use bytes::{BufMut, Bytes, BytesMut};
use crc32fast::Hasher;
use flate2::{Compress, Compression, FlushCompress};

/// The gzip header: no name, no time, unknown system.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// Below this, a stream's own bytes go as a stored block (5 bytes more)
/// rather than through a compressor: a reset of its tables zeroes about
/// 310 KB (some 14 µs), which a filtered push of a few events, or a
/// heartbeat, would pay for nothing.
const STORED_BELOW: usize = 4096;
/// The longest stored block.
const STORED_MAX: usize = u16::MAX as usize;

/// Bytes of a deflate stream that refer to nothing before them, with the
/// CRC-32 and length of what they decompress to.
#[derive(Debug, Clone)]
pub struct Segment {
    /// The deflate blocks, ending on a byte boundary, none of them final.
    pub bytes: Bytes,
    crc: Hasher,
}

impl Segment {
    /// `data` compressed at `level`, by a compressor of its own: what the
    /// hub shares between streams, made once.
    pub fn compressed(data: &[u8], level: Compression) -> Segment {
        Segment::of(data, deflate(&mut Compress::new(level, false), data))
    }

    /// `data` for one stream: compressed fast by this thread's compressor,
    /// or stored when short.
    pub fn own(data: &[u8]) -> Segment {
        if data.len() < STORED_BELOW {
            return Segment::of(data, stored(data));
        }
        thread_local! {
            static FAST: RefCell<Compress> = RefCell::new(Compress::new(Compression::fast(), false));
        }
        Segment::of(
            data,
            FAST.with_borrow_mut(|c| {
                c.reset();
                deflate(c, data)
            }),
        )
    }

    fn of(data: &[u8], bytes: Vec<u8>) -> Segment {
        let mut crc = Hasher::new();
        crc.update(data);
        Segment {
            bytes: bytes.into(),
            crc,
        }
    }
}

/// `data` as stored blocks: each a byte of header (not final, stored), its
/// length and the length's complement, then the bytes as they are.
fn stored(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 5 * (data.len() / STORED_MAX + 1));
    for block in data.chunks(STORED_MAX) {
        let len = block.len() as u16;
        out.push(0);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out
}

/// `data` deflated by `c` (fresh or reset), ended by a sync flush; or
/// stored, should that not fit the bound.
///
/// The output is sized for the worst case up front, so one call does it
/// all: miniz_oxide (flate2's default backend) can emit a corrupt stream
/// when a sync flush meets an output buffer that fills and is grown
/// (seen on 58 KB of random bytes at levels 0, 1 and 6).
fn deflate(c: &mut Compress, data: &[u8]) -> Vec<u8> {
    // Deflate's worst case is stored blocks: 5 bytes per block of up to
    // 64 KB; a compressor may cut smaller blocks, hence one per KB here,
    // plus the flush's empty block and a partial byte.
    let mut out = Vec::with_capacity(data.len() + (data.len() >> 10) * 5 + 64);
    let status = c
        .compress_vec(data, &mut out, FlushCompress::Sync)
        .expect("deflate takes any input");
    // Done once it took everything and stopped with room to spare.
    if status == flate2::Status::Ok
        && c.total_in() as usize == data.len()
        && out.len() < out.capacity()
    {
        out
    } else {
        stored(data)
    }
}

/// One stream's gzip body: the header, then segments, and the end when the
/// server ends it.
#[derive(Debug, Default)]
pub struct GzipStream {
    sent: Hasher,
}

impl GzipStream {
    /// The body's first bytes.
    pub fn header() -> Bytes {
        Bytes::from_static(&HEADER)
    }

    /// Counts `segment` as sent.
    pub fn sent(&mut self, segment: &Segment) {
        self.sent.combine(&segment.crc);
    }

    /// The body's last bytes: an empty final block, then the CRC-32 and the
    /// length (modulo 2³²) of everything sent.
    pub fn end(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(13);
        out.put_slice(&[1, 0, 0, 0xff, 0xff]);
        out.put_u32_le(self.sent.clone().finalize());
        out.put_u32_le(self.sent.total_len() as u32);
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn gunzip(body: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body).read_to_end(&mut out)?;
        Ok(out)
    }

    fn text(n: usize, seed: u64) -> Vec<u8> {
        (0..n)
            .map(|i| {
                format!(
                    "id: {}\ndata: {{\"value\":\"{}\"}}\n\n",
                    i,
                    (i as u64 * seed) % 977
                )
            })
            .collect::<String>()
            .into_bytes()
    }

    /// Segments made any way, in any order, after any other, make one body
    /// that a gzip decoder reads whole, CRC and length checked.
    #[test]
    fn segments_shared_and_own_make_one_valid_body() {
        let parts: Vec<Vec<u8>> = vec![
            b": connected\n\n".to_vec(),
            text(3000, 7),
            Vec::new(),
            b"\n".to_vec(),
            text(40, 3),
            vec![b'x'; 70_000],
            text(1, 1),
        ];
        let shared: Vec<Segment> = parts
            .iter()
            .map(|p| Segment::compressed(p, Compression::default()))
            .collect();
        let own: Vec<Segment> = parts.iter().map(|p| Segment::own(p)).collect();
        // Each part from one form or the other, alternating.
        let mut stream = GzipStream::default();
        let mut body = GzipStream::header().to_vec();
        let mut expected = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let s = if i % 2 == 0 { &shared[i] } else { &own[i] };
            stream.sent(s);
            body.extend_from_slice(&s.bytes);
            expected.extend_from_slice(part);
        }
        body.extend_from_slice(&stream.end());
        assert_eq!(gunzip(&body).unwrap(), expected);
        // The trailer is checked: a wrong count fails.
        let mut wrong = body.clone();
        let n = wrong.len();
        wrong[n - 1] ^= 1;
        assert!(gunzip(&wrong).is_err());
    }

    /// A stream cut before its end still gives every byte of every whole
    /// segment it received (a client reads each push as it comes).
    #[test]
    fn each_segment_decodes_as_soon_as_it_arrives() {
        let first = Segment::compressed(&text(500, 5), Compression::default());
        let second = Segment::own(b"id: 9\n: heartbeat\n\n");
        let mut body = GzipStream::header().to_vec();
        body.extend_from_slice(&first.bytes);
        body.extend_from_slice(&second.bytes);
        let mut inflate = flate2::Decompress::new(false);
        let mut out = Vec::with_capacity(1 << 20);
        inflate
            .decompress_vec(&body[10..], &mut out, flate2::FlushDecompress::Sync)
            .unwrap();
        let mut expected = text(500, 5);
        expected.extend_from_slice(b"id: 9\n: heartbeat\n\n");
        assert_eq!(out, expected);
    }

    /// Bytes that do not compress (random), at sizes around where an
    /// output buffer grown during a sync flush made miniz_oxide emit a
    /// corrupt stream, decode whole, shared and own.
    #[test]
    fn incompressible_bytes_decode_whole() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let random: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for len in [4096, 30_000, 58_400, 65_536, 70_000, 131_072, 200_000] {
            let data = &random[..len];
            for level in [
                Compression::none(),
                Compression::fast(),
                Compression::default(),
            ] {
                let segments = [Segment::compressed(data, level), Segment::own(data)];
                for s in &segments {
                    let mut stream = GzipStream::default();
                    stream.sent(s);
                    let mut body = GzipStream::header().to_vec();
                    body.extend_from_slice(&s.bytes);
                    body.extend_from_slice(&stream.end());
                    assert_eq!(gunzip(&body).unwrap(), data, "{len} bytes, {level:?}");
                }
            }
        }
    }

    #[test]
    fn short_own_bytes_are_stored_and_long_ones_compressed() {
        let short = Segment::own(b"id: 1\n: heartbeat\n\n");
        assert_eq!(short.bytes.len(), 19 + 5);
        let short = text(40, 3);
        assert!(short.len() < STORED_BELOW);
        assert_eq!(Segment::own(&short).bytes.len(), short.len() + 5);
        let long = text(1000, 11);
        assert!(Segment::own(&long).bytes.len() < long.len() / 3);
        assert_eq!(stored(&[]).len(), 0);
        assert_eq!(stored(&vec![0; STORED_MAX + 1]).len(), STORED_MAX + 1 + 10);
    }
}
