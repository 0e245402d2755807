//! Wakes long-poll fetches when a partition gets data. Shard-local: waiters
//! and notifiers live on the same core.

use std::{cell::RefCell, rc::Rc};

use futures_channel::oneshot;

/// One waiting fetch, possibly registered on several partitions: the first
/// append to any of them fires it.
pub type Waiter = Rc<RefCell<Option<oneshot::Sender<()>>>>;

#[derive(Default)]
pub struct AppendNotify {
    waiters: RefCell<Vec<Waiter>>,
}

impl AppendNotify {
    /// Registers a waiter, dropping ones that already fired or gave up, so an
    /// idle partition does not collect them.
    pub fn register(&self, waiter: Waiter) {
        let mut waiters = self.waiters.borrow_mut();
        waiters.retain(|w| w.borrow().as_ref().is_some_and(|tx| !tx.is_canceled()));
        waiters.push(waiter);
    }

    /// Fires every waiter (after an append).
    pub fn notify_all(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in waiters {
            if let Some(tx) = w.borrow_mut().take() {
                let _ = tx.send(());
            }
        }
    }
}
