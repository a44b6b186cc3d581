//! A command's output streams, read to their end: the first bytes kept up to a cap, the
//! rest read and thrown away, so that the command never blocks on a full pipe and the
//! server's memory never grows with what it writes.

use tokio::io::{AsyncRead, AsyncReadExt as _};

/// How much is read at a time.
const CHUNK: usize = 16 * 1024;

/// The bytes kept of one stream, and how many it wrote.
#[derive(Debug)]
pub(crate) struct Capped {
    kept: Vec<u8>,
    cap: usize,
    seen: u64,
}

impl Capped {
    pub(crate) fn new(cap: usize) -> Capped {
        Capped {
            kept: Vec::new(),
            cap,
            seen: 0,
        }
    }

    /// Takes `chunk` in: what fits under the cap is kept. The buffer grows by doubling but
    /// never past the cap, whatever the allocator's rounding of a plain `extend` would do.
    pub(crate) fn take(&mut self, chunk: &[u8]) {
        self.seen += chunk.len() as u64;
        let room = self.cap - self.kept.len();
        let kept = &chunk[..chunk.len().min(room)];
        let needed = self.kept.len() + kept.len();
        if needed > self.kept.capacity() {
            let grown = (self.kept.capacity() * 2).max(needed).min(self.cap);
            self.kept.reserve_exact(grown - self.kept.len());
        }
        self.kept.extend_from_slice(kept);
    }

    /// Whether some of the stream was thrown away.
    pub(crate) fn truncated(&self) -> bool {
        self.seen > self.kept.len() as u64
    }

    /// The bytes kept.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.kept
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.kept.capacity()
    }

    /// The bytes kept as text, invalid UTF-8 replaced.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.kept).into_owned()
    }
}

/// Reads `from` to its end into `into`. A read error ends the stream as its end would:
/// what was read stays.
pub(crate) async fn pump(mut from: impl AsyncRead + Unpin, into: &mut Capped) {
    let mut buffer = vec![0u8; CHUNK];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) => return,
            Ok(n) => into.take(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_past_the_cap_are_counted_and_thrown_away() {
        let mut capped = Capped::new(10);
        capped.take(b"hello ");
        assert!(!capped.truncated());
        capped.take(b"world, and more");
        assert_eq!(capped.bytes(), b"hello worl");
        assert!(capped.truncated());
        capped.take(&[b'x'; 100_000]);
        assert_eq!(capped.bytes(), b"hello worl");
        assert!(capped.capacity() <= 10, "{}", capped.capacity());
    }

    #[test]
    fn the_buffer_never_grows_past_the_cap_whatever_the_chunks() {
        for cap in [1, 7, 1000, 65_536, 100_001] {
            let mut capped = Capped::new(cap);
            for size in [1, 3, 4096, 16_384, 9, 70_000, 16_384] {
                capped.take(&vec![b'a'; size]);
                assert!(capped.capacity() <= cap, "cap {cap}: {}", capped.capacity());
            }
            assert_eq!(
                capped.bytes().len(),
                cap.min(1 + 3 + 4096 + 16_384 + 9 + 70_000 + 16_384)
            );
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_refused() {
        let mut capped = Capped::new(100);
        capped.take(b"ok \xff\xfe end");
        assert_eq!(capped.text(), "ok \u{fffd}\u{fffd} end");
        // A character cut by the cap becomes one replacement character.
        let mut cut = Capped::new(4);
        cut.take("abcé".as_bytes());
        assert_eq!(cut.text(), "abc\u{fffd}");
        assert!(cut.truncated());
    }
}
