//! Runs many futures of the shard at once, a bounded number at a time, on
//! the shard's own thread (no spawning, so they may borrow the shard).

use std::{future::Future, pin::Pin, task::Poll};

/// Polls the futures `work` yields, at most `limit` at a time, until all
/// have finished. Useful where each waits mostly on I/O (opening thousands
/// of partitions at start), so their waits overlap.
pub async fn for_each_bounded<'a, I>(work: I, limit: usize)
where
    I: IntoIterator,
    I::Item: Future<Output = ()> + 'a,
{
    let mut work = work.into_iter();
    let mut running: Vec<Pin<Box<dyn Future<Output = ()> + 'a>>> = Vec::new();
    std::future::poll_fn(|cx| loop {
        while running.len() < limit.max(1) {
            match work.next() {
                Some(f) => running.push(Box::pin(f)),
                None => break,
            }
        }
        if running.is_empty() {
            return Poll::Ready(());
        }
        let before = running.len();
        running.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if running.len() == before {
            return Poll::Pending;
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, rc::Rc, time::Duration};

    use super::*;

    #[test]
    fn runs_everything_never_more_than_the_limit_at_once() {
        let ran = glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let (now, peak, done) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
                let work = (0..50u64).map(|i| {
                    let (now, peak, done) = (now.clone(), peak.clone(), done.clone());
                    async move {
                        now.set(now.get() + 1);
                        peak.set(peak.get().max(now.get()));
                        glommio::timer::sleep(Duration::from_micros(100 * (i % 7))).await;
                        now.set(now.get() - 1);
                        done.set(done.get() + 1);
                    }
                });
                for_each_bounded(work, 8).await;
                (done.get(), peak.get())
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(ran, (50, 8));
    }
}
