//! A log closed or deleted off the shard. Closing flushes every dirty
//! segment and the directory, and deleting renames the directory: on ext4
//! each may wait on the journal for tens to hundreds of milliseconds, and a
//! shutdown or StopReplica does it for every partition of the shard (up to
//! 2 s held on the shard for 1,000 partitions). The shard does the in-memory
//! part and the cheap trims; the `log-dirs` thread does the rest, in order
//! with the directory creations queued before it.

use std::fs::File;
use std::io;
use std::sync::Arc;

use super::super::log_create::LOG_DIRS;
use super::super::segment::ClosingSegment;
use super::{sync_dir, Log};

impl Log {
    /// `close` off the shard: the active segment's final time-index entry
    /// is added here; the `log-dirs` thread trims the active segment's
    /// indexes and file, fdatasyncs every dirty segment, every pending roll
    /// and the directory, closes the files, and `done` gets the result.
    /// Until `done` says Ok the log end offset is not known durable (the
    /// recovery point a caller checkpoints must wait for it).
    pub fn close_queued(
        mut self,
        done: impl FnOnce(io::Result<()>) + Send + 'static,
    ) -> io::Result<()> {
        self.require_no_staged_writes("close")?;
        let roll_files: Vec<Arc<File>> = self.take_pending_roll_files();
        let active_base_offset = self.active().base_offset();
        let dir = self.dir.clone();
        let dir_dirty = self.dir_dirty;
        let segments: Vec<ClosingSegment> = self
            .segments
            .into_values()
            .map(|s| {
                let active = s.base_offset() == active_base_offset;
                s.into_closing(active)
            })
            .collect();
        LOG_DIRS.push(move || {
            // On an error the rest are dropped unsynced: the recovery
            // point the caller keeps then makes the next open rescan.
            let closed = segments
                .into_iter()
                .try_for_each(ClosingSegment::close)
                .and_then(|()| roll_files.iter().try_for_each(|f| f.sync_data()))
                .and_then(|()| if dir_dirty { sync_dir(&dir) } else { Ok(()) });
            done(closed);
        });
        Ok(())
    }

    /// `delete` off the shard: the `log-dirs` thread closes the files and
    /// renames the directory away (after any creation queued before it),
    /// then `done` gets the rename's result; the directory keeps its name
    /// until then.
    pub fn delete_queued(self, done: impl FnOnce(io::Result<()>) + Send + 'static) {
        let dir = self.dir.clone();
        let files: Vec<_> = self
            .segments
            .into_values()
            .map(|s| s.into_closing(false))
            .collect();
        LOG_DIRS.push(move || {
            drop(files);
            done(super::super::log_deleter::delete_log_dir(&dir));
        });
    }
}
