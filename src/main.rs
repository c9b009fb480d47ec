//! `tollgate serve --config FILE` and `tollgate check-config --config FILE`.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

// jemalloc rather than glibc's malloc: measured 14 % less CPU per chat request, and memory
// given back after a burst of streams or connections, which glibc kept (docs/performance.md,
// issue 31). Its settings are compiled in from .cargo/config.toml.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const USAGE: &str = "usage: tollgate <serve|check-config> [--config FILE] [--upgrade]   (default conf/tollgate.toml)
  --upgrade   serve: take the listening sockets over from the instance running on the same
              server.upgrade_socket, which stops once this one accepts (README, Operations)";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(cmd) = args.next() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let mut path = PathBuf::from("conf/tollgate.toml");
    let mut upgrade = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--config" | "-c" => match args.next() {
                Some(p) => path = PathBuf::from(p),
                None => {
                    eprintln!("--config needs a file\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--upgrade" | "-u" => upgrade = true,
            other => {
                eprintln!("unknown argument `{other}`\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match cmd.as_str() {
        "check-config" => match tollgate::config::load_file(&path) {
            Ok(_) => {
                println!("{}: ok", path.display());
                ExitCode::SUCCESS
            }
            Err(errs) => {
                for e in &errs {
                    eprintln!("{}: {e}", path.display());
                }
                eprintln!("{}: {} problem(s)", path.display(), errs.len());
                ExitCode::FAILURE
            }
        },
        "serve" => {
            let config = match tollgate::config::load_file(&path) {
                Ok(c) => c,
                Err(errs) => {
                    for e in &errs {
                        eprintln!("{}: {e}", path.display());
                    }
                    return ExitCode::FAILURE;
                }
            };
            tollgate::logging::init(config.server.log_format);
            let listen = config.server.listen;
            let server = match tollgate::server::build_server(config, path, upgrade) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("cannot start: {e}");
                    return ExitCode::FAILURE;
                }
            };
            tracing::info!(%listen, "tollgate listening");
            server.run_forever()
        }
        "--version" | "version" => {
            println!("tollgate {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
