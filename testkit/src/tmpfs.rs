//! A tmpfs of a few hundred KB of a test's own, for the disk-full tests: put the gateway's files
//! on it, [`SmallTmpfs::fill`] it to see what the gateway does when a write fails with ENOSPC,
//! [`SmallTmpfs::free`] it to see it recover.
//!
//! Mounting needs root (or CAP_SYS_ADMIN); where it is refused, [`SmallTmpfs::mount`] says why
//! and the test reports `SKIPPED: <why>` with [`crate::services::skip`].

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file [`SmallTmpfs::fill`] writes.
const FILLER: &str = ".filler";

/// A mounted tmpfs; unmounted and its mount point removed when dropped.
pub struct SmallTmpfs {
    dir: PathBuf,
}

impl SmallTmpfs {
    /// Mounts a tmpfs of `size_kb` KB (rounded up to whole pages), writable by every user, on a
    /// fresh temporary directory; `Err(why)` when mounting is not permitted here.
    pub fn mount(size_kb: u64) -> Result<SmallTmpfs, String> {
        let dir = crate::gateway::temp_dir();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kb}k,mode=1777")])
            .arg("tmpfs")
            .arg(&dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Ok(SmallTmpfs { dir }),
            Ok(o) => {
                let _ = std::fs::remove_dir(&dir);
                Err(format!(
                    "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {}",
                    String::from_utf8_lossy(&o.stderr)
                        .lines()
                        .next()
                        .unwrap_or("")
                        .trim()
                ))
            }
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(format!("cannot run mount: {e}"))
            }
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes a filler file (`.filler` at the root) until the file system is full, down to
    /// the last byte: after it every write of data fails with ENOSPC (creating an empty file
    /// may still work). Returns the bytes written; `Err` for any failure but ENOSPC.
    pub fn fill(&self) -> io::Result<u64> {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(FILLER))?;
        let buf = vec![0xA5u8; 64 * 1024];
        let mut written = 0u64;
        let mut chunk = buf.len();
        // Big writes first, then smaller ones into what is left of the last page.
        while chunk > 0 {
            match f.write(&buf[..chunk]) {
                Ok(0) => chunk /= 2,
                Ok(n) => written += n as u64,
                Err(e) if is_enospc(&e) => chunk /= 2,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // Flushed to the page cache by each write already: tmpfs has nowhere else to go.
        Ok(written)
    }

    /// Deletes the filler and waits (up to 10 s) until the file system has its space back;
    /// nothing when there is no filler. The wait is needed: a test running beside this one
    /// that spawns a process forks the whole test binary, and until that child execs it holds
    /// every open descriptor, the filler's too, so the pages are freed only when it lets go
    /// (CI once saw ENOSPC on a write right after the unlink).
    pub fn free(&self) {
        let path = self.dir.join(FILLER);
        let len = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => panic!("reading the filler of {}: {e}", self.dir.display()),
        };
        let before = self.available();
        if let Err(e) = std::fs::remove_file(&path) {
            panic!("removing the filler of {}: {e}", self.dir.display());
        }
        let (Some(before), true) = (before, len > 0) else {
            return;
        };
        // Back within a page of the filler's length: the last partial page is the slack.
        let want = before + len.saturating_sub(4096);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.available().is_some_and(|now| now < want) {
            assert!(
                std::time::Instant::now() < deadline,
                "{}: the filler's {len} bytes were not given back within 10 s",
                self.dir.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Bytes free for an unprivileged writer, from `stat -f` (statvfs without unsafe code);
    /// `None` when it cannot be read.
    fn available(&self) -> Option<u64> {
        let out = Command::new("stat")
            .args(["-f", "-c", "%a %S"])
            .arg(&self.dir)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        let mut it = text.split_whitespace().map(|n| n.parse::<u64>().ok());
        Some(it.next()?? * it.next()??)
    }

    /// Writes `len` bytes to a new file `name` under the mount and syncs it: the check a test
    /// makes that the disk is full (`Err` with ENOSPC, see [`is_enospc`]) or free again.
    pub fn try_write(&self, name: &str, len: usize) -> io::Result<()> {
        let mut f = File::create(self.dir.join(name))?;
        f.write_all(&vec![b'x'; len])?;
        f.sync_all()
    }
}

/// Whether `e` is "no space left on device".
pub fn is_enospc(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull || e.raw_os_error() == Some(28)
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.dir)
            .output()
            .is_ok_and(|o| o.status.success())
            // Busy (a gateway still holds a file open): detach it now, freed when let go.
            || Command::new("umount")
                .arg("-l")
                .arg(&self.dir)
                .output()
                .is_ok_and(|o| o.status.success());
        if unmounted {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}
