//! Single flight, per instance: the first request for an entry that is not stored goes
//! upstream (the leader, holding a [`Leading`]); identical requests meanwhile wait for it to
//! finish, then read the store. A leader that failed stored nothing, and they go upstream
//! themselves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// The keys being fetched on this instance.
#[derive(Default)]
pub struct Flights {
    map: Arc<Mutex<HashMap<String, watch::Receiver<()>>>>,
}

/// What a request for `key` does.
pub enum Joined {
    /// It leads: it goes upstream, and its entry is stored before this is dropped.
    Lead(Leading),
    /// Another request leads; this one waits for it.
    Follow(watch::Receiver<()>),
}

/// A leader's place: dropping it (stored or failed) lets its followers go on.
pub struct Leading {
    key: String,
    map: Arc<Mutex<HashMap<String, watch::Receiver<()>>>>,
    _done: watch::Sender<()>,
}

impl Drop for Leading {
    fn drop(&mut self) {
        if let Ok(mut m) = self.map.lock() {
            m.remove(&self.key);
        }
    }
}

impl Flights {
    pub fn join(&self, key: &str) -> Joined {
        // A poisoned map (a panic while it was held) is only a lost optimisation: lead.
        let Ok(mut m) = self.map.lock() else {
            let (tx, _) = watch::channel(());
            return Joined::Lead(Leading {
                key: String::new(),
                map: Arc::default(),
                _done: tx,
            });
        };
        if let Some(rx) = m.get(key) {
            return Joined::Follow(rx.clone());
        }
        let (tx, rx) = watch::channel(());
        m.insert(key.to_owned(), rx);
        Joined::Lead(Leading {
            key: key.to_owned(),
            map: self.map.clone(),
            _done: tx,
        })
    }
}

/// Waits until the leader is done, at most `bound`.
pub async fn wait(mut rx: watch::Receiver<()>, bound: Duration) {
    // The leader never sends: `changed` returns when its sender is dropped.
    let _ = tokio::time::timeout(bound, rx.changed()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_wait_for_the_leader_and_the_next_request_leads_again() {
        let f = Flights::default();
        let Joined::Lead(lead) = f.join("k") else {
            panic!("the first request leads");
        };
        let Joined::Follow(rx) = f.join("k") else {
            panic!("the second follows");
        };
        let waiting = tokio::spawn(wait(rx, Duration::from_secs(10)));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(lead);
        tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(f.join("k"), Joined::Lead(_)));
    }
}
