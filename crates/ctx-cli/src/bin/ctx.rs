//! The `ctx` binary: everything is in the library (src/lib.rs).

fn main() -> std::process::ExitCode {
    ctx_cli::main()
}
