//! The bytes of one object file: a 16-byte header, then one zstd frame.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "CRNO"
//! 4       1     format version, 1
//! 5       1     kind: 1 = blob (the plain bytes themselves),
//!                     2 = chunk list (the plain bytes are the concatenation
//!                     of the chunks it lists)
//! 6       1     codec: 1 = zstd
//! 7       1     reserved, 0
//! 8       8     plain length, u64 little-endian
//! 16      …     the encoded bytes (one zstd frame)
//! ```
//!
//! The object's name is the SHA-256 of the plain bytes, whatever the kind and
//! codec: a chunk list names a large file's content exactly as a blob of the
//! same content would, and only stores it differently.
//!
//! A chunk list's encoded bytes, once decompressed, are `count` entries of 36
//! bytes each: the chunk's SHA-256 (32 raw bytes), then its plain length
//! (u32 little-endian). Every chunk is a blob; the lengths add up to the
//! header's plain length.

/// The four bytes every object file starts with.
pub(crate) const MAGIC: [u8; 4] = *b"CRNO";
/// The header version this build writes and reads.
pub(crate) const FORMAT_VERSION: u8 = 1;
/// Header length in bytes.
pub(crate) const HEADER_LEN: usize = 16;
const CODEC_ZSTD: u8 = 1;

/// What an object's encoded bytes are.
///
/// The kind is part of the header, not of the name: a large file stored as a
/// [`ObjectKind::ChunkList`] has the name a [`ObjectKind::Blob`] of the same
/// content would have. A reader meeting a kind it does not know refuses it
/// rather than misreading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ObjectKind {
    /// The plain bytes, compressed.
    Blob,
    /// The list of the content-defined chunks (each a blob) whose
    /// concatenation is the plain bytes (DESIGN §6).
    ChunkList,
}

impl ObjectKind {
    fn code(self) -> u8 {
        match self {
            ObjectKind::Blob => 1,
            ObjectKind::ChunkList => 2,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(ObjectKind::Blob),
            2 => Some(ObjectKind::ChunkList),
            _ => None,
        }
    }
}

/// Bytes per entry of a decoded chunk list: 32-byte hash, u32 length.
pub(crate) const LIST_ENTRY_LEN: usize = 36;

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: ObjectKind,
    pub(crate) plain_len: u64,
}

impl Header {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(&MAGIC);
        h[4] = FORMAT_VERSION;
        h[5] = self.kind.code();
        h[6] = CODEC_ZSTD;
        h[8..].copy_from_slice(&self.plain_len.to_le_bytes());
        h
    }

    /// Decodes a header, or says what is wrong with it.
    pub(crate) fn decode(b: &[u8]) -> Result<Header, HeaderError> {
        if b.len() < HEADER_LEN {
            return Err(HeaderError::Damaged("is shorter than its 16-byte header"));
        }
        if b[..4] != MAGIC {
            return Err(HeaderError::Damaged("does not start with the object magic"));
        }
        if b[4] != FORMAT_VERSION {
            return Err(HeaderError::Newer { version: b[4] });
        }
        let kind = ObjectKind::from_code(b[5]).ok_or(HeaderError::Newer { version: b[4] })?;
        if b[6] != CODEC_ZSTD {
            return Err(HeaderError::Newer { version: b[4] });
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[8..16]);
        Ok(Header {
            kind,
            plain_len: u64::from_le_bytes(len),
        })
    }
}

/// Why a header did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// Not an object this or any cairn wrote.
    Damaged(&'static str),
    /// A version, kind or codec this build does not know.
    Newer { version: u8 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_refusals() {
        let h = Header {
            kind: ObjectKind::Blob,
            plain_len: 1 << 40,
        };
        let b = h.encode();
        assert_eq!(Header::decode(&b).unwrap(), h);
        assert!(matches!(
            Header::decode(&b[..8]),
            Err(HeaderError::Damaged(_))
        ));
        let mut bad = b;
        bad[0] = b'X';
        assert!(matches!(Header::decode(&bad), Err(HeaderError::Damaged(_))));
        let mut newer = b;
        newer[4] = 2;
        assert!(matches!(
            Header::decode(&newer),
            Err(HeaderError::Newer { .. })
        ));
        let list = Header {
            kind: ObjectKind::ChunkList,
            plain_len: 7,
        };
        assert_eq!(Header::decode(&list.encode()).unwrap(), list);
        let mut kind = b;
        kind[5] = 9;
        assert!(matches!(
            Header::decode(&kind),
            Err(HeaderError::Newer { .. })
        ));
    }
}
