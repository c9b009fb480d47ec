//! Token counts (the fallback when an upstream reports no usage) run on the blocking pool, at
//! most one fewer than the cores at a time: a long or hostile text must never stall a proxy
//! thread, and a burst of them must not take every core.

use crate::runtime::Shared;

/// `None` only when the count itself panicked (logged).
pub async fn off_thread<T>(shared: &Shared, count: impl FnOnce() -> T + Send + 'static) -> Option<T>
where
    T: Send + 'static,
{
    // The semaphore is never closed; were it, counting unthrottled beats not counting.
    let _permit = shared.counting.acquire().await.ok();
    match tokio::task::spawn_blocking(count).await {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!("token count failed: {e}");
            None
        }
    }
}
