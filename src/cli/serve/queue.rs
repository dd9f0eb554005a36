//! The bounded queue between the webhook and the workers: a manifest already queued or being
//! scanned is not queued again (registries send an event per tag, and resend what was not
//! answered 2xx), nor one scanned a moment ago by this process (the same digest under another
//! tag: the same verdict). A full queue refuses, so the webhook answers 503 and the registry
//! sends the events again later.

use std::collections::{HashSet, VecDeque};
use std::sync::{Condvar, Mutex};

/// How many scanned keys are remembered: a few hours of pushes on a busy registry.
const REMEMBERED: usize = 10_000;

#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    Queued,
    /// Queued or being scanned already, or scanned a moment ago.
    Duplicate,
    Full,
    /// Shutting down.
    Closed,
}

pub struct Queue<J> {
    state: Mutex<State<J>>,
    ready: Condvar,
    capacity: usize,
}

struct State<J> {
    jobs: VecDeque<(String, J)>,
    /// Keys queued or being scanned.
    active: HashSet<String>,
    /// Keys scanned lately, oldest first.
    done: HashSet<String>,
    done_order: VecDeque<String>,
    closed: bool,
}

impl<J> Queue<J> {
    pub fn new(capacity: usize) -> Queue<J> {
        Queue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                active: HashSet::new(),
                done: HashSet::new(),
                done_order: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<J>> {
        // A worker that panicked mid-update leaves sets that are still consistent enough to go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn offer(&self, key: String, job: J) -> Offer {
        self.enqueue(key, job, true)
    }

    /// Whether [`Self::offer`] would queue `key` now (for the journal, written before the offer).
    pub fn admits(&self, key: &str) -> bool {
        self.refuses(&self.lock(), key, true).is_none()
    }

    /// Queues a job the journal kept or a failed scan to try again, whatever the queue holds
    /// (it was accepted once already); not one queued, running or settled meanwhile.
    pub fn restore(&self, key: String, job: J) -> bool {
        self.enqueue(key, job, false) == Offer::Queued
    }

    /// Why `key` is not queued now (`bounded`: a full queue refuses too), if it is not.
    fn refuses(&self, s: &State<J>, key: &str, bounded: bool) -> Option<Offer> {
        if s.closed {
            Some(Offer::Closed)
        } else if s.active.contains(key) || s.done.contains(key) {
            Some(Offer::Duplicate)
        } else if bounded && s.jobs.len() >= self.capacity {
            Some(Offer::Full)
        } else {
            None
        }
    }

    fn enqueue(&self, key: String, job: J, bounded: bool) -> Offer {
        let mut s = self.lock();
        if let Some(no) = self.refuses(&s, &key, bounded) {
            return no;
        }
        s.active.insert(key.clone());
        s.jobs.push_back((key, job));
        self.ready.notify_one();
        Offer::Queued
    }

    /// The next job, waiting for one; None once closed. Its key stays active until [`Self::finish`].
    pub fn take(&self) -> Option<(String, J)> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(j) = s.jobs.pop_front() {
                return Some(j);
            }
            s = self.ready.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Marks `key` active for a scan a worker does inside its job (an image of a pushed index):
    /// false when it is queued, being scanned or scanned lately.
    pub fn claim(&self, key: &str) -> bool {
        let mut s = self.lock();
        if s.active.contains(key) || s.done.contains(key) {
            return false;
        }
        s.active.insert(key.to_string())
    }

    /// `key` is no longer active; `remember`: it was scanned (or found not to be an image), so
    /// events naming it again are duplicates. A failed scan is not remembered: the next push retries.
    pub fn finish(&self, key: &str, remember: bool) {
        let mut s = self.lock();
        s.active.remove(key);
        if remember && s.done.insert(key.to_string()) {
            s.done_order.push_back(key.to_string());
            if s.done_order.len() > REMEMBERED {
                let old = s.done_order.pop_front().expect("longer than the bound");
                s.done.remove(&old);
            }
        }
    }

    /// Jobs waiting.
    pub fn depth(&self) -> usize {
        self.lock().jobs.len()
    }

    /// Stops the queue: workers finish the scan they are in and take no other; the keys of the
    /// jobs that were waiting are returned (they are dropped).
    pub fn close(&self) -> Vec<String> {
        let mut s = self.lock();
        s.closed = true;
        let dropped = s.jobs.drain(..).map(|(k, _)| k).collect();
        self.ready.notify_all();
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_queued_running_or_just_scanned_is_not_queued_again() {
        let q = Queue::new(8);
        assert_eq!(q.offer("a".into(), 1), Offer::Queued);
        assert_eq!(q.offer("a".into(), 2), Offer::Duplicate, "queued");
        let (k, j) = q.take().unwrap();
        assert_eq!((k.as_str(), j), ("a", 1));
        assert_eq!(q.offer("a".into(), 3), Offer::Duplicate, "running");
        assert!(!q.claim("a"));
        q.finish("a", true);
        assert_eq!(q.offer("a".into(), 4), Offer::Duplicate, "scanned a moment ago");
        // A failed scan is tried again on the next event.
        assert_eq!(q.offer("b".into(), 5), Offer::Queued);
        q.take().unwrap();
        q.finish("b", false);
        assert_eq!(q.offer("b".into(), 6), Offer::Queued);
        assert_eq!(q.depth(), 1);
    }

    #[test]
    fn a_full_queue_refuses_and_takes_again_once_a_job_is_taken() {
        let q = Queue::new(2);
        assert_eq!(q.offer("a".into(), ()), Offer::Queued);
        assert_eq!(q.offer("b".into(), ()), Offer::Queued);
        assert_eq!(q.offer("c".into(), ()), Offer::Full);
        assert_eq!(q.offer("a".into(), ()), Offer::Duplicate, "a duplicate is told apart from a full queue");
        q.take().unwrap();
        assert_eq!(q.offer("c".into(), ()), Offer::Queued);
    }

    #[test]
    fn claims_within_a_job_are_single_flight_too() {
        let q: Queue<()> = Queue::new(2);
        assert!(q.claim("img"));
        assert!(!q.claim("img"));
        assert_eq!(q.offer("img".into(), ()), Offer::Duplicate);
        q.finish("img", true);
        assert!(!q.claim("img"));
    }

    #[test]
    fn the_memory_of_scanned_keys_is_bounded() {
        let q: Queue<()> = Queue::new(1);
        for i in 0..=REMEMBERED {
            q.finish(&i.to_string(), true);
        }
        assert_eq!(q.offer("0".into(), ()), Offer::Queued, "the oldest is forgotten");
        assert_eq!(q.offer(REMEMBERED.to_string(), ()), Offer::Duplicate);
    }

    #[test]
    fn closing_wakes_the_waiting_workers_and_drops_what_waits() {
        let q = std::sync::Arc::new(Queue::<()>::new(4));
        let q2 = q.clone();
        // Waiting or not yet waiting when the queue closes: either way it ends with None.
        let worker = std::thread::spawn(move || q2.take());
        assert!(q.close().is_empty());
        assert!(worker.join().unwrap().is_none());

        let q = Queue::new(4);
        q.offer("a".into(), ());
        q.offer("b".into(), ());
        assert_eq!(q.close(), ["a", "b"]);
        assert!(q.take().is_none());
        assert_eq!(q.offer("c".into(), ()), Offer::Closed);
    }
}
