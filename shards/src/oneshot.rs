//! A single-shard oneshot channel: the reply slot of a cross-shard call.
//! Both ends live on one executor, so an `Rc<RefCell<..>>` is enough and no
//! atomics are paid on the reply path.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_alive: bool,
}

pub struct Sender<T> {
    slot: Rc<RefCell<Slot<T>>>,
}

pub struct Receiver<T> {
    slot: Rc<RefCell<Slot<T>>>,
}

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Rc::new(RefCell::new(Slot {
        value: None,
        waker: None,
        sender_alive: true,
    }));
    (Sender { slot: slot.clone() }, Receiver { slot })
}

impl<T> Sender<T> {
    /// The receiver was dropped: nobody waits for a value.
    pub fn is_canceled(&self) -> bool {
        Rc::strong_count(&self.slot) == 1
    }

    pub fn send(self, value: T) {
        let waker = {
            let mut slot = self.slot.borrow_mut();
            debug_assert!(slot.value.is_none(), "oneshot sent twice");
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = self.slot.borrow_mut();
            slot.sender_alive = false;
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The sender was dropped without sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Canceled;

impl<T> Future for Receiver<T> {
    type Output = Result<T, Canceled>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.slot.borrow_mut();
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Ok(v));
        }
        if !slot.sender_alive {
            return Poll::Ready(Err(Canceled));
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
