//! SIGINT and SIGTERM: exit codes 130 and 143, no output or temporary file left.

use std::io::Write;

use spillway::algorithms::io::remove_temporary_outputs;

/// Ends running jobs on SIGINT and SIGTERM: the job is aborted, its temporary outputs go, and
/// the process exits with 128 + the signal. Outside a job (checking paths, copying standard
/// input, waiting for a FIFO's other end) the process exits at once. If the job does not end
/// within a few seconds (a rank computing without calling the runtime), or a second signal
/// comes, the process removes the temporary outputs itself and exits at once (spill files
/// have no names: nothing of them remains).
///
/// SIGXFSZ is ignored: a write beyond the file-size limit (`ulimit -f`) then fails with EFBIG
/// and is reported (exit 1, temporary outputs removed) instead of killing the process with its
/// temporary files left behind.
pub(crate) fn handle_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    // SAFETY: sets the disposition of SIGXFSZ to "ignore" (no handler runs); called at the
    // start of main, and no code of this program relies on the signal.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        let mut first = true;
        for signal in signals.forever() {
            let name = if signal == SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            if !first || spillway::interrupt(signal) == 0 {
                // No job to end cleanly (or asked twice): go now.
                remove_temporary_outputs();
                let line = format!("spillway: interrupted by {name}\n");
                let _ = std::io::stderr().write_all(line.as_bytes());
                std::process::exit(128 + signal);
            }
            first = false;
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(5));
                remove_temporary_outputs();
                let line =
                    format!("spillway: interrupted by {name}; the job did not stop in time\n");
                let _ = std::io::stderr().write_all(line.as_bytes());
                std::process::exit(128 + signal);
            });
        }
    });
}
