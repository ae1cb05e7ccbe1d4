//! A run's trace: the W3C trace id every span of the run carries, and the
//! span id of its root, both derived from the run id.
//!
//! Why derived and not stored: a run's tasks may be run by workers on other
//! machines (`ctx worker`) and by later sessions (a resume), and each of
//! them must put its spans in the same trace without asking anyone. A
//! value every process computes from the run id needs no coordination, no
//! schema migration in either store, and gives a run made before tracing
//! existed the same trace id when it is exported after the fact
//! (`ctx runs export --format otlp`). The ids are a SHA-256 of the run id
//! under a domain tag, so they look random to a backend (W3C asks for
//! random trace ids so that sampling on them is fair) and two runs never
//! share one in practice.

use sha2::{Digest, Sha256};

/// The tag hashed before the run id, so these ids are never another
/// fingerprint's digest.
const DOMAIN: &[u8] = b"ctx trace v1\0";

/// The run's trace id (16 bytes) and its root span's id (8 bytes): the
/// `invoke_workflow` span of the session that started the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTraceIds {
    /// The W3C trace id; never all zeros.
    pub trace_id: [u8; 16],
    /// The root span's id; never all zeros.
    pub root_span_id: [u8; 8],
}

impl RunTraceIds {
    /// The ids of `run_id`'s trace.
    pub fn of(run_id: &str) -> RunTraceIds {
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(run_id.as_bytes())
            .finalize();
        let mut trace_id = [0u8; 16];
        trace_id.copy_from_slice(&digest[..16]);
        let mut root_span_id = [0u8; 8];
        root_span_id.copy_from_slice(&digest[16..24]);
        // All zeros is W3C's "invalid"; a digest of zeros is as likely as
        // guessing the hash, but the rule costs one line.
        if trace_id == [0; 16] {
            trace_id[15] = 1;
        }
        if root_span_id == [0; 8] {
            root_span_id[7] = 1;
        }
        RunTraceIds {
            trace_id,
            root_span_id,
        }
    }

    /// The trace id as 32 lower-case hex digits, as `ctx runs show`
    /// prints it and backends search for it.
    pub fn trace_id_hex(&self) -> String {
        self.trace_id.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_are_a_function_of_the_run_id_alone() {
        let a = RunTraceIds::of("20261203-101500-abcd");
        assert_eq!(a, RunTraceIds::of("20261203-101500-abcd"));
        let b = RunTraceIds::of("20261203-101500-abce");
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.root_span_id, b.root_span_id);
        let hex = a.trace_id_hex();
        assert_eq!(hex.len(), 32);
        assert!(
            hex.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        // Pinned: a change of derivation would split old runs' exports from
        // their live traces.
        assert_eq!(
            RunTraceIds::of("r").trace_id_hex(),
            "f0ad787d116133b06075b4c2e5e24273"
        );
    }
}
