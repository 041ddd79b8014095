use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use super::*;

const BLOCK: usize = READ_CACHE_BLOCK_BYTES;

/// A directory on the repository's filesystem (O_DIRECT needs a real one).
fn test_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/read-cache-tests")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[2] ^ seed)
        .collect()
}

fn write_file(path: &std::path::Path, data: &[u8]) -> Arc<File> {
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    f.write_all(data).unwrap();
    Arc::new(f)
}

fn slice(file: &Arc<File>, position: u64, len: usize) -> FileSlice {
    FileSlice {
        file: file.clone(),
        position,
        len: len as u32,
        direct: true,
        may_be_cold: false,
        cached: None,
    }
}

async fn read_all(cache: &ReadCache, s: &FileSlice) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let end = s.position + s.len as u64;
    let mut pos = s.position;
    while pos < end {
        let chunk = cache.read_chunk(s, pos).await?;
        assert!(!chunk.is_empty());
        out.extend_from_slice(&chunk);
        pos += chunk.len() as u64;
    }
    assert_eq!(pos, end);
    Ok(out)
}

fn run<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn reads_at_any_offset_match_the_file() {
    run(|| async {
        let dir = test_dir("offsets");
        let data = pattern(5 * BLOCK + 777, 1);
        let file = write_file(&dir.join("a.log"), &data);
        let cache = ReadCache::new(DEFAULT_READ_CACHE_CAPACITY_BYTES);
        let cases = [
            (0, 1),
            (0, data.len()),
            (1, BLOCK),
            (BLOCK - 3, 6),
            (BLOCK, BLOCK),
            (3 * BLOCK + 5, 2 * BLOCK + 772),
            (data.len() - 1, 1),
            (12345, 3 * BLOCK),
        ];
        for (pos, len) in cases {
            let got = read_all(&cache, &slice(&file, pos as u64, len))
                .await
                .unwrap();
            assert_eq!(got, &data[pos..pos + len], "pos {pos} len {len}");
        }
        let (hits, misses, cached) = cache.stats();
        assert!(hits > 0, "later reads hit");
        // The tail block is re-read as bigger slices need more of it.
        assert!(misses >= 6, "{misses}");
        assert_eq!(cached, data.len());
        assert_eq!(cache.open_files(), 1);
        // Past the end of the file is an error, not a panic or zeros.
        let e = read_all(&cache, &slice(&file, data.len() as u64 - 10, 20))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn a_grown_tail_block_is_read_again() {
    run(|| async {
        let dir = test_dir("growth");
        let path = dir.join("a.log");
        let first = pattern(BLOCK + 100, 2);
        let file = write_file(&path, &first);
        let cache = ReadCache::new(DEFAULT_READ_CACHE_CAPACITY_BYTES);
        let s = slice(&file, 0, first.len());
        assert_eq!(read_all(&cache, &s).await.unwrap(), first);
        // Append like the log does; the old tail block must not be served short.
        let more = pattern(5000, 3);
        use std::os::unix::fs::FileExt;
        file.write_all_at(&more, first.len() as u64).unwrap();
        let mut all = first.clone();
        all.extend_from_slice(&more);
        let s = slice(&file, 0, all.len());
        assert_eq!(read_all(&cache, &s).await.unwrap(), all);
        let s = slice(&file, first.len() as u64 - 50, 5050);
        assert_eq!(
            read_all(&cache, &s).await.unwrap(),
            &all[first.len() - 50..]
        );
        // Bytes a slice never asked for (the writer's zero padding) are not
        // trusted: overwrite past the valid bytes, a wider slice sees the change.
        file.write_all_at(&[0xAB; 10], all.len() as u64).unwrap();
        let s = slice(&file, all.len() as u64, 10);
        assert_eq!(read_all(&cache, &s).await.unwrap(), [0xAB; 10]);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn eviction_bounds_memory_and_closes_files() {
    run(|| async {
        let dir = test_dir("evict");
        let capacity_blocks = 4;
        let cache = ReadCache::new(capacity_blocks * BLOCK);
        let mut files = Vec::new();
        for i in 0..6u8 {
            let data = pattern(2 * BLOCK, i);
            let file = write_file(&dir.join(format!("{i}.log")), &data);
            let got = read_all(&cache, &slice(&file, 0, data.len()))
                .await
                .unwrap();
            assert_eq!(got, data);
            let (_, _, cached) = cache.stats();
            assert!(cached <= capacity_blocks * BLOCK, "{cached}");
            files.push((file, data));
        }
        // Only the last two files still have blocks, so only they stay open.
        assert_eq!(cache.open_files(), 2);
        // An evicted file reads correctly again.
        let (file, data) = &files[0];
        let got = read_all(&cache, &slice(file, 10, BLOCK)).await.unwrap();
        assert_eq!(got, &data[10..10 + BLOCK]);
        assert_eq!(cache.stats().2, capacity_blocks * BLOCK);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn deleted_files_are_served_and_forgotten() {
    run(|| async {
        let dir = test_dir("deleted");
        let path = dir.join("a.log");
        let data = pattern(3 * BLOCK, 9);
        let file = write_file(&path, &data);
        let cache = ReadCache::new(DEFAULT_READ_CACHE_CAPACITY_BYTES);
        let s = slice(&file, 0, data.len());
        assert_eq!(read_all(&cache, &s).await.unwrap(), data);
        assert_eq!(cache.open_files(), 1);
        std::fs::remove_file(&path).unwrap();
        // The in-flight slice still reads (its descriptor keeps the inode),
        // and the cache lets go of the file.
        assert_eq!(read_all(&cache, &s).await.unwrap(), data);
        assert_eq!(cache.open_files(), 0);
        assert_eq!(cache.stats().2, 0);
        // A new file (possibly reusing the inode) reads its own bytes.
        let other = pattern(BLOCK, 10);
        let file2 = write_file(&path, &other);
        let s2 = slice(&file2, 0, other.len());
        assert_eq!(read_all(&cache, &s2).await.unwrap(), other);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

#[test]
fn truncated_and_rewritten_blocks_are_not_stale() {
    run(|| async {
        let dir = test_dir("truncate");
        let data = pattern(BLOCK + 4096, 4);
        let file = write_file(&dir.join("a.log"), &data);
        let cache = ReadCache::new(DEFAULT_READ_CACHE_CAPACITY_BYTES);
        let s = slice(&file, 0, data.len());
        assert_eq!(read_all(&cache, &s).await.unwrap(), data);
        file.set_len(100).unwrap();
        let s = slice(&file, 0, 100);
        assert_eq!(read_all(&cache, &s).await.unwrap(), &data[..100]);
        use std::os::unix::fs::FileExt;
        let new_tail = pattern(4096, 5);
        file.write_all_at(&new_tail, 100).unwrap();
        let s = slice(&file, 100, 4096);
        assert_eq!(read_all(&cache, &s).await.unwrap(), new_tail);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}
