//! The prefix-cache warm-up (`config.cache_warm_up: K`, issue 24).
//!
//! A map of N items sends N prompts that agree on everything before their
//! item: the entity block, the dependency outputs, the map prompt's text
//! before its placeholder. Sent all at once, they reach the provider
//! before any of them has been read, so each computes the shared prefix
//! itself and none finds it in the cache. With a warm-up the executor
//! sends one of them first and holds its siblings in the ready queue until
//! that call's first token arrives: by then the provider has read the
//! prompt and (OpenAI, vLLM, SGLang, llama.cpp with several slots) keeps
//! its prefix, so the siblings find it.
//!
//! ## What is a group
//!
//! A *group* is the items of one map that became ready together, when at
//! least `K` of them did (items taken from a resumed run's store are not
//! counted: they are not sent). They share their prefix by construction;
//! tasks that are not items are never grouped or held. Whether the shared
//! prefix is long enough to be cached is known only once the warm-up
//! call's prompt is assembled: under
//! [`WARM_UP_MIN_TOKENS`](ctx_model::prompt_cache::WARM_UP_MIN_TOKENS)
//! (counted with the task's tokenizer, its system prompt included) the
//! warm-up call releases its siblings before it is sent
//! ([`worth_warming`]).
//!
//! ## When the siblings go
//!
//! The first item of a group to be dispatched (its budget reserved, a
//! concurrency slot free) is the warm-up call; it carries a
//! [`FirstToken`] signal to the engine
//! ([`InferenceEngine::infer_with_first_token`](ctx_engine::InferenceEngine::infer_with_first_token)).
//! Its siblings popped from the ready queue meanwhile are *held*: they
//! hold no slot and reserve no budget, so other ready tasks run in their
//! place, and the run never has more calls in flight than `concurrency`
//! nor reserves more than the budget. The group is released, its held
//! items queued again at their priority, at the first of:
//!
//! * the signal: the engine's first streamed chunk (`--stream`), or the
//!   response itself for an engine that sees its answer whole (a request
//!   without streaming, a command): [`EngineCalls`](crate::engine_call)
//!   fires it when the call returns, answer or error;
//! * the warm-up call's job ending, however (failed before its call,
//!   panicked, cancelled): a held item never waits for a call that will
//!   not come.
//!
//! The signal crosses from the engine's task to the dispatcher over a
//! channel ([`WarmUp::released`]), which wakes the dispatch loop.

use std::collections::HashMap;

use ctx_engine::FirstToken;
use ctx_model::{Plan, SubTask};
use ctx_prompt::AssembledPrompt;
use ctx_tokens::TokenCounter;
use tokio::sync::mpsc;

/// Where one group stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No item dispatched yet: the next one to go is the warm-up call.
    Pending,
    /// Task `call` is the warm-up call, in flight; siblings are held.
    Warming { call: usize },
    /// Released: the group's items go as any task.
    Released,
}

/// One group: its state and the items held for it, in the order they
/// were popped.
#[derive(Debug)]
struct Group {
    state: State,
    held: Vec<usize>,
}

/// The run's warm-up bookkeeping, owned by the dispatcher. Groups are
/// keyed by their map task's index.
pub(crate) struct WarmUp {
    /// `K`: the fewest ready items that form a group; `None`: off.
    min_calls: Option<usize>,
    groups: HashMap<usize, Group>,
    /// Each warm-up call's signal sends its group here.
    tx: mpsc::UnboundedSender<usize>,
    rx: mpsc::UnboundedReceiver<usize>,
}

impl WarmUp {
    /// The warm-up `plan` asks for (`config.cache_warm_up`); off without
    /// it.
    pub(crate) fn new(plan: &Plan) -> WarmUp {
        let (tx, rx) = mpsc::unbounded_channel();
        WarmUp {
            min_calls: plan.config.cache_warm_up,
            groups: HashMap::new(),
            tx,
            rx,
        }
    }

    /// Map task `map` expanded and `ready` of its items wait to be sent:
    /// they form a group when there are at least `K`.
    pub(crate) fn expanded(&mut self, map: usize, ready: usize) {
        if self.min_calls.is_some_and(|k| ready >= k.max(2)) {
            self.groups.insert(
                map,
                Group {
                    state: State::Pending,
                    held: Vec::new(),
                },
            );
        }
    }

    /// Whether task `i`, an item of `group` (its map; `None` for a task
    /// that is no item), must wait for its group's warm-up call; it is then
    /// held, to be queued again on release.
    pub(crate) fn hold(&mut self, i: usize, group: Option<usize>) -> bool {
        let Some(g) = group.and_then(|m| self.groups.get_mut(&m)) else {
            return false;
        };
        if matches!(g.state, State::Warming { .. }) {
            g.held.push(i);
            return true;
        }
        false
    }

    /// Task `i`, an item of `group`, is being dispatched: the signal it
    /// carries when it is its group's warm-up call (the first of the group
    /// to go), else `None`.
    pub(crate) fn first_token_for(&mut self, i: usize, group: Option<usize>) -> Option<FirstToken> {
        let m = group?;
        let g = self.groups.get_mut(&m)?;
        if g.state != State::Pending {
            return None;
        }
        g.state = State::Warming { call: i };
        let tx = self.tx.clone();
        // The receiver lives as long as the run; a send after it is gone
        // has nobody left to release.
        Some(FirstToken::new(move || {
            let _ = tx.send(m);
        }))
    }

    /// Task `i`'s job ended: a group whose warm-up call it was is
    /// released. Returns the items to queue again.
    pub(crate) fn ended(&mut self, i: usize) -> Vec<usize> {
        let group = self
            .groups
            .iter()
            .find(|(_, g)| g.state == State::Warming { call: i })
            .map(|(&m, _)| m);
        group.map(|m| self.release(m)).unwrap_or_default()
    }

    /// Releases `group`: its held items, to queue again (none when it was
    /// released already).
    pub(crate) fn release(&mut self, group: usize) -> Vec<usize> {
        match self.groups.get_mut(&group) {
            Some(g) => {
                g.state = State::Released;
                std::mem::take(&mut g.held)
            }
            None => Vec::new(),
        }
    }

    /// Whether a warm-up call is in flight (only then can a release come).
    pub(crate) fn warming(&self) -> bool {
        self.groups
            .values()
            .any(|g| matches!(g.state, State::Warming { .. }))
    }

    /// The next group whose warm-up call's first token arrived.
    pub(crate) async fn released(&mut self) -> Option<usize> {
        self.rx.recv().await
    }
}

/// Whether `task`'s call, with prompt `assembled` and its task's
/// `counter`, shares a prefix long enough to be worth its siblings'
/// wait: its system prompt and the shared prefix (ctx-deps'
/// `prompt_cache::shared_end`, the prefix `cache_key: auto` names) come
/// to at least
/// [`WARM_UP_MIN_TOKENS`](ctx_model::prompt_cache::WARM_UP_MIN_TOKENS).
pub(crate) fn worth_warming(
    plan: &Plan,
    task: &SubTask,
    assembled: &AssembledPrompt,
    counter: &dyn TokenCounter,
) -> bool {
    let shared = crate::prompt_cache::shared_end(plan, task, assembled);
    let system = task.tool_or_prompt.params.system.as_deref().unwrap_or("");
    let tokens = counter.count(system) + counter.count(&assembled.text[..shared]);
    tokens >= ctx_model::prompt_cache::WARM_UP_MIN_TOKENS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warm(k: Option<usize>) -> WarmUp {
        let mut plan = ctx_test_support::plan(&[("a", &[])]);
        plan.config.cache_warm_up = k;
        WarmUp::new(&plan)
    }

    #[test]
    fn a_group_forms_from_k_ready_items_and_its_first_dispatch_warms() {
        let mut w = warm(Some(3));
        w.expanded(0, 2);
        assert!(w.first_token_for(1, Some(0)).is_none(), "2 < K: no group");
        w.expanded(0, 3);
        assert!(!w.hold(1, Some(0)), "nothing is held before a call warms");
        let signal = w
            .first_token_for(1, Some(0))
            .expect("the first to go warms");
        assert!(w.warming());
        assert!(w.first_token_for(2, Some(0)).is_none(), "one warm-up call");
        assert!(w.hold(2, Some(0)));
        assert!(w.hold(3, Some(0)));
        assert!(!w.hold(9, None), "a task that is no item is never held");
        signal.fire();
        assert_eq!(w.rx.try_recv().ok(), Some(0));
        assert_eq!(w.release(0), [2, 3]);
        assert!(!w.warming());
        assert!(!w.hold(4, Some(0)), "released: items go");
        assert_eq!(w.ended(1), Vec::<usize>::new(), "released once");
    }

    #[test]
    fn the_warm_up_calls_end_releases_its_group_and_off_means_no_group() {
        let mut w = warm(Some(2));
        w.expanded(0, 5);
        let _signal = w.first_token_for(1, Some(0));
        assert!(w.hold(2, Some(0)));
        assert_eq!(w.ended(7), Vec::<usize>::new(), "another task's end");
        assert_eq!(w.ended(1), [2]);
        let mut off = warm(None);
        off.expanded(0, 100);
        assert!(off.first_token_for(1, Some(0)).is_none());
        assert!(!off.warming());
    }
}
