//! A tool server's place in the marketplace (DESIGN.md, Rules: MCP): pending → live (approve),
//! pending → rejected, live ⇄ suspended; and the operator's moves between them.

/// Where a registered tool server stands. Only `Live` services are listed to agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceState {
    Pending,
    Live,
    Rejected,
    Suspended,
}

impl ServiceState {
    pub const ALL: [ServiceState; 4] = [
        ServiceState::Pending,
        ServiceState::Live,
        ServiceState::Rejected,
        ServiceState::Suspended,
    ];

    /// The name in the API and in the ledger's `status` column.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Pending => "pending",
            ServiceState::Live => "live",
            ServiceState::Rejected => "rejected",
            ServiceState::Suspended => "suspended",
        }
    }

    pub fn parse(s: &str) -> Option<ServiceState> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

impl std::fmt::Display for ServiceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The operator's moves (`POST /api/v1/admin/mcp/services/{slug}/{move}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    Approve,
    Reject,
    Suspend,
    Resume,
}

impl Move {
    /// The name in the path and in the `tollgate_mcp_events_total` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Move::Approve => "approve",
            Move::Reject => "reject",
            Move::Suspend => "suspend",
            Move::Resume => "resume",
        }
    }

    /// The states the move leaves from.
    pub fn from(self) -> &'static [ServiceState] {
        match self {
            Move::Approve | Move::Reject => &[ServiceState::Pending],
            Move::Suspend => &[ServiceState::Live],
            Move::Resume => &[ServiceState::Suspended],
        }
    }

    /// The state it goes to.
    pub fn to(self) -> ServiceState {
        match self {
            Move::Approve | Move::Resume => ServiceState::Live,
            Move::Reject => ServiceState::Rejected,
            Move::Suspend => ServiceState::Suspended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_back_as_written_and_nothing_else_parses() {
        for s in ServiceState::ALL {
            assert_eq!(ServiceState::parse(s.as_str()), Some(s));
        }
        assert_eq!(ServiceState::parse("Live"), None);
        assert_eq!(ServiceState::parse(""), None);
    }

    #[test]
    fn the_moves_follow_the_lifecycle() {
        use ServiceState::*;
        let moves = [Move::Approve, Move::Reject, Move::Suspend, Move::Resume];
        let edges: Vec<(ServiceState, ServiceState)> = moves
            .iter()
            .flat_map(|m| m.from().iter().map(move |f| (*f, m.to())))
            .collect();
        assert_eq!(
            edges,
            [
                (Pending, Live),
                (Pending, Rejected),
                (Live, Suspended),
                (Suspended, Live)
            ]
        );
        // Nothing leaves `rejected`.
        assert!(moves.iter().all(|m| !m.from().contains(&Rejected)));
    }
}
