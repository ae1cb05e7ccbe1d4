//! The `ctx` binary: everything is in the library (src/lib.rs), so that
//! `cargo xtask man` can reach the clap definition.

fn main() -> std::process::ExitCode {
    ctx_cli::main()
}
