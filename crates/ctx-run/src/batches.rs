//! A run's provider batches (`ctx run --batch`) as `ctx runs show` lists
//! them: each batch's id, status, request counts, and when it was
//! created and ended (docs/runs.md, "Durable batches").

use ctx_store::RunBatch;
use ctx_table::printable;

/// The `batches` section of `ctx runs show RUN`: a line per batch, and
/// one per input file whose batch was never created.
pub fn batches_text(batches: &[RunBatch]) -> String {
    let mut out = String::from("batches\n");
    for b in batches {
        let Some(id) = &b.id else {
            out.push_str(&format!(
                "  file {}  {}, never made a batch ({}), uploaded {}\n",
                printable(&b.input_file_id),
                ctx_model::display::count(b.requests, "request", "requests"),
                match &b.file_deleted_at {
                    Some(at) => format!("deleted {at}"),
                    None => "not yet deleted".into(),
                },
                b.uploaded_at
            ));
            continue;
        };
        out.push_str(&format!(
            "  {}  {}  {} total: {} completed, {} failed  created {}  ended {}",
            printable(id),
            printable(b.status.as_deref().unwrap_or("-")),
            b.total.max(b.requests),
            b.completed,
            b.failed,
            b.created_at.as_deref().unwrap_or("-"),
            b.ended_at.as_deref().unwrap_or("-"),
        ));
        if let Some(at) = &b.cancel_requested_at {
            out.push_str(&format!("  cancelled by ctx runs cancel {at}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(id: Option<&str>, status: Option<&str>) -> RunBatch {
        RunBatch {
            id: id.map(str::to_string),
            status: status.map(str::to_string),
            requests: 2,
            total: 2,
            completed: 1,
            failed: 0,
            model: "m".into(),
            input_file_id: "file-1".into(),
            uploaded_at: "2026-01-01T00:00:00.000Z".into(),
            created_at: id.map(|_| "2026-01-01T00:00:01.000Z".into()),
            ended_at: None,
            collected_at: None,
            file_deleted_at: None,
            cancel_requested_at: None,
        }
    }

    #[test]
    fn each_batch_and_each_file_never_made_a_batch_is_a_line() {
        let text = batches_text(&[
            batch(Some("batch_1"), Some("in_progress")),
            batch(None, None),
        ]);
        assert_eq!(
            text,
            "batches\n  batch_1  in_progress  2 total: 1 completed, 0 failed  \
             created 2026-01-01T00:00:01.000Z  ended -\n  \
             file file-1  2 requests, never made a batch (not yet deleted), \
             uploaded 2026-01-01T00:00:00.000Z\n"
        );
    }
}
