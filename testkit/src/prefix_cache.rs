//! A provider's prompt cache as the fake keeps it ([`crate::Mode::PrefixCache`]): per fake, so
//! per endpoint, as a real provider's cache is per machine. Every prompt (a request's
//! `messages`) it answers is remembered; a later request whose messages begin with a remembered
//! prompt reads that prompt from the cache, as turn k+1 of a conversation begins with turn k's
//! prompt. Tokens are counted by [`tokens`], so a test can tell what the fake will report.

use std::sync::Mutex;

use serde_json::Value;

/// The prompts one fake has answered, each as its messages' JSON texts.
#[derive(Default)]
pub struct Seen(Mutex<Vec<Vec<String>>>);

impl Seen {
    /// The usage of a request with `messages`: (prompt tokens, of which read from the cache).
    /// The prompt is remembered for later requests.
    pub fn answer(&self, messages: &Value) -> (u64, u64) {
        let prompt = texts(messages);
        let mut seen = self.0.lock().unwrap();
        let cached = seen
            .iter()
            .filter(|p| prompt.starts_with(p))
            .map(|p| count(p))
            .max()
            .unwrap_or(0);
        let total = count(&prompt);
        if !seen.contains(&prompt) {
            seen.push(prompt);
        }
        (total, cached)
    }
}

fn texts(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .map(|m| m.iter().map(Value::to_string).collect())
        .unwrap_or_default()
}

fn count(prompt: &[String]) -> u64 {
    prompt.iter().map(|m| m.len() as u64 / 4 + 1).sum()
}

/// The prompt tokens the fake counts for `messages` (a JSON array, as sent): a quarter of
/// each message's JSON text, plus one.
pub fn tokens(messages: &Value) -> u64 {
    count(&texts(messages))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_prompt_seen_before_is_read_from_the_cache_by_the_next_turn() {
        let seen = Seen::default();
        let t1 = json!([{"role": "system", "content": "long"}, {"role": "user", "content": "a"}]);
        let mut t2 = t1.clone();
        let more = t2.as_array_mut().unwrap();
        more.push(json!({"role": "assistant", "content": "b"}));
        more.push(json!({"role": "user", "content": "c"}));
        assert_eq!(seen.answer(&t1), (tokens(&t1), 0));
        assert_eq!(seen.answer(&t2), (tokens(&t2), tokens(&t1)));
        assert_eq!(
            Seen::default().answer(&t2),
            (tokens(&t2), 0),
            "another endpoint"
        );
    }
}
