//! When each part of a request happened: its upstream legs (every attempt, failed over, cut or
//! served, and a resumed stream's continuations), its first output to the client and its
//! settlement. The pipeline records them as they happen; what reads them at the end (the
//! metrics' histograms, the trace's spans, the request log's record) reads only this.

use std::time::Instant;

/// A request's timings, kept in its context.
#[derive(Debug, Default)]
pub struct Timeline {
    /// When the first output went to the client: a stream's commit (its 200 and first
    /// content); `None` for a JSON reply, whose first byte is its whole answer.
    pub first_output: Option<Instant>,
    /// Every upstream attempt, in order.
    pub legs: Vec<Leg>,
    /// The ledger settlement: when it began and ended.
    pub settlement: Option<(Instant, Instant)>,
}

/// One upstream attempt: one candidate model on one endpoint.
#[derive(Debug, Clone)]
pub struct Leg {
    pub model: String,
    pub provider: String,
    /// The endpoint's `host[:port]`.
    pub endpoint: String,
    pub start: Instant,
    /// `None` while it runs; a leg still open when the request ends served it to the end.
    pub end: Option<Instant>,
    pub outcome: Outcome,
    /// A continuation of a stream cut after its first output.
    pub continuation: bool,
}

/// How a leg ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It answered (a stream: to its end or until the client left).
    Served,
    /// The provider refused the request itself; its error went to the client.
    Rejected(String),
    /// It failed before any output reached the client and the next candidate was tried:
    /// the reason's label (`connect`, `5xx`, `429`, `timeout`, …) and what happened.
    Failover {
        reason: &'static str,
        detail: String,
    },
    /// A committed stream broke after its first output: resumed on the next leg, or ended
    /// with an error event.
    Cut(String),
}

impl Outcome {
    /// Its name in traces and the request log.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Served => "served",
            Outcome::Rejected(_) => "rejected",
            Outcome::Failover { .. } => "failover",
            Outcome::Cut(_) => "cut",
        }
    }
}

impl Timeline {
    /// A leg begins now; returns its index for [`Timeline::end`].
    pub fn begin(
        &mut self,
        model: &str,
        provider: &str,
        endpoint: String,
        continuation: bool,
    ) -> usize {
        self.legs.push(Leg {
            model: model.to_owned(),
            provider: provider.to_owned(),
            endpoint,
            start: Instant::now(),
            end: None,
            outcome: Outcome::Served,
            continuation,
        });
        self.legs.len() - 1
    }

    /// Leg `i` ended now, as `outcome`; a leg that already ended keeps what it recorded.
    pub fn end(&mut self, i: usize, outcome: Outcome) {
        if let Some(leg) = self.legs.get_mut(i) {
            if leg.end.is_none() {
                leg.end = Some(Instant::now());
                leg.outcome = outcome;
            }
        }
    }

    /// The last leg still open ended now, as `outcome` (a stream cut mid-way).
    pub fn end_open(&mut self, outcome: Outcome) {
        if let Some(i) = self.legs.iter().rposition(|l| l.end.is_none()) {
            self.end(i, outcome);
        }
    }

    /// The first output reached the client now (kept if it already had).
    pub fn output(&mut self) {
        self.first_output.get_or_insert_with(Instant::now);
    }

    /// The leg that served the answer (the last one served or cut), if any.
    pub fn serving(&self) -> Option<&Leg> {
        self.legs
            .iter()
            .rev()
            .find(|l| matches!(l.outcome, Outcome::Served | Outcome::Cut(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leg_ends_once_and_the_open_one_is_the_last() {
        let mut t = Timeline::default();
        let a = t.begin("m1", "p1", "a:1".into(), false);
        t.end(
            a,
            Outcome::Failover {
                reason: "5xx",
                detail: "503".into(),
            },
        );
        t.end(a, Outcome::Served);
        assert_eq!(t.legs[0].outcome.label(), "failover");
        let b = t.begin("m2", "p2", "b:1".into(), false);
        t.end_open(Outcome::Cut("closed".into()));
        t.end(b, Outcome::Served);
        assert_eq!(t.legs[1].outcome, Outcome::Cut("closed".into()));
        t.begin("m3", "p2", "b:1".into(), true);
        assert_eq!(t.serving().map(|l| l.model.as_str()), Some("m3"));
        t.output();
        let first = t.first_output;
        t.output();
        assert_eq!(t.first_output, first);
    }
}
