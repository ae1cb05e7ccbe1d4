//! Links the `ctx` binary with packed relative relocations (`-z
//! pack-relative-relocs`, DT_RELR) where the toolchain supports them.
//!
//! Why: `ctx` is a position-independent executable, and the dynamic
//! loader patches every pointer in its read-only data at start-up, one
//! relocation record each: about 51,000 in a release build (157,000 in a
//! debug one), where the loader then spent more than half of the
//! instructions of `ctx --version` (callgrind). DT_RELR stores the same
//! relocations as a bitmap that the loader walks in a fraction of the
//! instructions, and makes the file smaller (24 bytes per relocation
//! become about one bit); the executable stays position-independent
//! (ASLR kept, unlike `-no-pie`).
//!
//! It needs GNU ld 2.38+ (or lld 15+) and glibc 2.36+, so it is probed:
//! the flag is added only when the C toolchain cargo links with accepts
//! it for a trivial program, and only for Linux targets with glibc built
//! on the host itself (a cross link is left as it is).

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    if env("CARGO_CFG_TARGET_OS") != "linux"
        || env("CARGO_CFG_TARGET_ENV") != "gnu"
        || env("TARGET") != env("HOST")
    {
        return;
    }
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let source = out.join("relr-probe.c");
    if std::fs::write(&source, "int main(void) { return 0; }\n").is_err() {
        return;
    }
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".to_string());
    let accepted = Command::new(linker)
        .arg(&source)
        .arg("-Wl,-z,pack-relative-relocs")
        .arg("-o")
        .arg(out.join("relr-probe"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(out.join("relr-probe"))
            .status()
            .is_ok_and(|s| s.success());
    if accepted {
        println!("cargo:rustc-link-arg-bin=ctx=-Wl,-z,pack-relative-relocs");
    }
}
