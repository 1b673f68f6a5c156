//! The read side of Java's `MappedFile`: a CommitLog file mapped read-only, so a pull copies
//! its records straight out of the page cache with one `memcpy` each.
//!
//! Why: a catch-up pull of 1 KiB records whose queue is interleaved with others in the
//! CommitLog is 32 separate ranges. Read through the io engine, each range is one io_uring op
//! (fd lookup, page-cache lookup, the kernel's copy into a registered buffer) and one more copy
//! out of that buffer, about 0.5 µs per record beyond the copy itself; from the mapping it is
//! the copy alone. W4 went from 1.38–1.61 to 0.86–1.07 s of broker CPU per GiB served
//! (docs/BENCHMARKS.md, "CommitLog records copied from a read-only mapping").
//!
//! What a mapping adds is a new way to fail: touching a page the kernel cannot supply (a read
//! error of the disk, or a file cut shorter than the mapping) raises `SIGBUS`, which would
//! kill the broker. Every copy out of a mapping therefore runs inside [`MappedFile::copy_guarded`]:
//! a process-wide `SIGBUS` handler (installed with the first mapping) checks whether the
//! faulting address lies in the range the current thread is copying from; if so it maps a
//! zero page over the faulting page, so the copy finishes, and records the fault. The caller
//! then discards what it copied, the mapping is marked poisoned (never read again), and the
//! read goes through the io engine, which reports the real error (or the data) as before. A
//! `SIGBUS` anywhere else goes to the handler that was installed before, as if this one did
//! not exist.

use std::cell::Cell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

/// Most files mapped at once by the process; a file past it is read through the io engine.
/// Each mapping is one of the kernel's memory areas, whose count per process is capped by
/// `vm.max_map_count` (65,530 by default) for every other use too (thread stacks, the
/// allocator's arenas); a broker with tens of thousands of ConsumeQueue files must not use
/// them up. CommitLog files are 1 GiB each, so this is never the bound for them.
pub const MAPPED_FILES_MAX: usize = 8192;

/// Mappings alive now (counted in `map`, released in `Drop`).
static MAPPED_FILES: AtomicUsize = AtomicUsize::new(0);

/// Takes one of `max` mapping slots from `live`; false when all are taken.
fn take_slot(live: &AtomicUsize, max: usize) -> bool {
    live.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
        (n < max).then_some(n + 1)
    })
    .is_ok()
}

/// A file mapped read-only and shared (it sees every write to the file at once).
#[derive(Debug)]
pub struct MappedFile {
    addr: NonNull<u8>,
    len_bytes: usize,
    /// A guarded copy faulted: the mapping may hold a zero page where the file has data.
    poisoned: AtomicBool,
}

// SAFETY: the mapping is read-only and lives until `Drop`; the pointer is never written
// through, so sharing it between threads is sharing immutable memory.
unsafe impl Send for MappedFile {}
// SAFETY: as above.
unsafe impl Sync for MappedFile {}

/// A guarded copy touched a page the kernel could not supply (`SIGBUS`); what was copied is
/// not the file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingFault;

impl MappedFile {
    /// Maps the first `len_bytes` of `file` read-only.
    pub fn map(file: &File, len_bytes: u64) -> io::Result<MappedFile> {
        let len_bytes = usize::try_from(len_bytes)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "mapping length"))?;
        install_sigbus_handler()?;
        if !take_slot(&MAPPED_FILES, MAPPED_FILES_MAX) {
            return Err(io::Error::other(format!(
                "{MAPPED_FILES_MAX} files are mapped already (MAPPED_FILES_MAX)"
            )));
        }
        // SAFETY: a new shared read-only mapping of an open file; the kernel picks the address.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let error = io::Error::last_os_error();
            MAPPED_FILES.fetch_sub(1, Ordering::AcqRel);
            return Err(error);
        }
        let addr = NonNull::new(ptr.cast::<u8>()).expect("mmap never returns null on success");
        Ok(MappedFile {
            addr,
            len_bytes,
            poisoned: AtomicBool::new(false),
        })
    }

    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// Whether an earlier copy faulted; a poisoned mapping must not be read.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Runs `copy` over the whole mapping with `SIGBUS` guarded (see the module docs). `copy`
    /// must only read the slice (copy out of it); if any page it touched could not be
    /// supplied, the mapping is poisoned and the result is `Err(MappingFault)`: what `copy`
    /// produced must be discarded. Not re-entrant on one thread.
    pub fn copy_guarded<R>(&self, copy: impl FnOnce(&[u8]) -> R) -> Result<R, MappingFault> {
        let start = self.addr.as_ptr() as usize;
        let previous = GUARD.with(|g| g.replace((start, start + self.len_bytes)));
        assert_eq!(previous, (0, 0), "guarded copies do not nest");
        FAULTED.with(|f| f.set(false));
        // SAFETY: the mapping is `len_bytes` long, readable and alive for `&self`; a page the
        // kernel cannot supply is replaced by the guard instead of killing the process.
        let bytes = unsafe { std::slice::from_raw_parts(self.addr.as_ptr(), self.len_bytes) };
        let out = copy(bytes);
        GUARD.with(|g| g.set((0, 0)));
        if FAULTED.with(Cell::get) {
            self.poisoned.store(true, Ordering::Release);
            return Err(MappingFault);
        }
        Ok(out)
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map` (zero pages the guard placed inside it go with it);
        // nobody can hold a slice of it past `&self`.
        unsafe { libc::munmap(self.addr.as_ptr().cast(), self.len_bytes) };
        MAPPED_FILES.fetch_sub(1, Ordering::AcqRel);
    }
}

thread_local! {
    /// The address range this thread is copying from inside `copy_guarded`; (0, 0) outside.
    /// Const-initialized and without a destructor, so the signal handler can read it.
    static GUARD: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Set by the handler when it replaced a page of the guarded range.
    static FAULTED: Cell<bool> = const { Cell::new(false) };
}

static INSTALL: Once = Once::new();
static INSTALL_ERROR: Mutex<Option<i32>> = Mutex::new(None);
static PAGE_SIZE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// The `SIGBUS` action before ours (set once, before our handler can run).
static mut PREVIOUS_ACTION: Option<libc::sigaction> = None;

fn install_sigbus_handler() -> io::Result<()> {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        PAGE_SIZE_BYTES.store(usize::try_from(page).unwrap_or(4096), Ordering::Relaxed);
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value, filled in below;
        // PREVIOUS_ACTION is written here once, before the handler is installed and can read it.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                *lock_install_error() = io::Error::last_os_error().raw_os_error();
                return;
            }
            *std::ptr::addr_of_mut!(PREVIOUS_ACTION) = Some(previous);
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) != 0 {
                *lock_install_error() = io::Error::last_os_error().raw_os_error();
            }
        }
    });
    match *lock_install_error() {
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => Ok(()),
    }
}

fn lock_install_error() -> std::sync::MutexGuard<'static, Option<i32>> {
    INSTALL_ERROR.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `SIGBUS` handler: only async-signal-safe work (thread-local cells, `mmap`,
/// `sigaction`).
extern "C" fn on_sigbus(_signal: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (start, end) = GUARD.with(Cell::get);
    if (start..end).contains(&addr) {
        let page_size = PAGE_SIZE_BYTES.load(Ordering::Relaxed);
        let page = addr & !(page_size - 1);
        // SAFETY: replaces one page inside our own read-only mapping with zeros; nothing else
        // can be mapped there.
        let zeroed = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                page_size,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if zeroed != libc::MAP_FAILED {
            FAULTED.with(|f| f.set(true));
            return;
        }
    }
    // Not ours (or the page could not be replaced): put the previous action back; returning
    // re-runs the faulting instruction, which now meets that action (by default: the process
    // dies of SIGBUS, as it would have without this handler).
    // SAFETY: PREVIOUS_ACTION was set before this handler was installed and never changes.
    unsafe {
        let previous = (*std::ptr::addr_of!(PREVIOUS_ACTION)).unwrap_or_else(|| {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            dfl
        });
        libc::sigaction(libc::SIGBUS, &previous, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        f.write_all(bytes).unwrap();
        (dir, f)
    }

    #[test]
    fn a_guarded_copy_reads_the_file_and_sees_later_writes() {
        let (_dir, file) = file_of(&[7u8; 8192]);
        let map = MappedFile::map(&file, 8192).unwrap();
        let head = map.copy_guarded(|b| b[..4].to_vec()).unwrap();
        assert_eq!(head, vec![7, 7, 7, 7]);
        std::os::unix::fs::FileExt::write_at(&file, b"abcd", 4096).unwrap();
        let later = map.copy_guarded(|b| b[4096..4100].to_vec()).unwrap();
        assert_eq!(later, b"abcd".to_vec());
        assert!(!map.is_poisoned());
    }

    #[test]
    fn a_page_the_kernel_cannot_supply_is_a_fault_not_a_crash() {
        let page = 4096 * 4;
        let (_dir, file) = file_of(&vec![1u8; page * 2]);
        let map = MappedFile::map(&file, (page * 2) as u64).unwrap();
        assert_eq!(map.copy_guarded(|b| b[page]).unwrap(), 1);
        // Cut the file under the mapping: its second half now lies past the end (SIGBUS).
        file.set_len(page as u64).unwrap();
        let copied = map.copy_guarded(|b| b[page..page + 8].to_vec());
        assert_eq!(copied, Err(MappingFault));
        assert!(map.is_poisoned());
        // The thread is unguarded again, and pages still in the file read as before.
        assert_eq!(GUARD.with(Cell::get), (0, 0));
        assert_eq!(map.copy_guarded(|b| b[0]).unwrap(), 1);
    }

    /// Set in the child process of the test below.
    const UNGUARDED_CHILD_ENV: &str = "MAPPED_FILE_TEST_UNGUARDED_CHILD";

    /// The handler only takes faults inside a guarded copy: any other SIGBUS still ends the
    /// process with SIGBUS (run in a child: this test binary itself re-run on this one test).
    #[test]
    fn a_fault_outside_a_guarded_copy_still_kills_the_process() {
        use std::os::unix::process::ExitStatusExt;
        let page = 4096 * 4;
        if std::env::var_os(UNGUARDED_CHILD_ENV).is_some() {
            let (_dir, file) = file_of(&vec![1u8; page * 2]);
            let map = MappedFile::map(&file, (page * 2) as u64).unwrap();
            file.set_len(page as u64).unwrap();
            // SAFETY: deliberately touching the page past the end of the file, unguarded.
            let byte = unsafe { std::ptr::read_volatile(map.addr.as_ptr().add(page)) };
            println!("read {byte} past the end of the file");
            std::process::exit(0);
        }
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "store::mapped_file::tests::a_fault_outside_a_guarded_copy_still_kills_the_process",
                "--test-threads=1",
            ])
            .env(UNGUARDED_CHILD_ENV, "1")
            .output()
            .unwrap()
            .status;
        assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
    }

    #[test]
    fn mapping_slots_stop_at_the_cap_and_come_back() {
        let live = AtomicUsize::new(0);
        assert!(take_slot(&live, 2));
        assert!(take_slot(&live, 2));
        assert!(!take_slot(&live, 2), "the third of two");
        assert_eq!(live.load(Ordering::Relaxed), 2);
        live.fetch_sub(1, Ordering::AcqRel);
        assert!(take_slot(&live, 2));
    }

    #[test]
    fn a_mapping_counts_while_it_lives() {
        let (_dir, file) = file_of(&[1u8; 4096]);
        let map = MappedFile::map(&file, 4096).unwrap();
        // Other tests map and unmap at the same time: only the lower bound is certain.
        assert!(MAPPED_FILES.load(Ordering::Acquire) >= 1);
        drop(map);
    }

    #[test]
    fn an_empty_mapping_is_refused() {
        let (_dir, file) = file_of(b"");
        assert!(MappedFile::map(&file, 0).is_err());
    }
}
