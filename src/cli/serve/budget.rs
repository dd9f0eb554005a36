//! The connection budget: at most [`MAX_CONNECTIONS`] connections held at once, whatever their
//! addresses, and room kept for the probes and the registry. A connection is *idle* while it
//! waits for a request's head (a new one that has sent nothing or part of it, or one kept alive
//! between requests, its last answer written or not); it is *busy* from a head read until its
//! answer is made. A new connection gets in unless every connection held is busy: when the
//! budget is spent the longest idle one is closed for it (those that never sent the token
//! first). Busy requests that are neither `/healthz` nor carry the token may take at most
//! [`UNPROVEN`] slots; beyond, they are answered 503. So connections from however many
//! addresses that send nothing, trickle heads, or do not read their answers cannot keep
//! `/healthz` or the registry's authorised POST out: they are what is shed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Connections held at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Slots kept for `/healthz` and token-authenticated requests.
pub const RESERVED: usize = 32;
/// Requests of anyone else served at once.
pub const UNPROVEN: usize = MAX_CONNECTIONS - RESERVED;

/// What a request is, by its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `GET /healthz`: answered at once, from whoever asks.
    Probe,
    /// Carries `--token`.
    Token,
    /// Anything else (no token, a wrong one, `/metrics`, without `--token` every request).
    Other,
}

struct Conn {
    /// Set on eviction: the connection's task drops it (closing the socket).
    close: Arc<Notify>,
    /// The class of the request being answered; None while idle.
    busy: Option<Class>,
    /// When it last became idle, in [`State::clock`] ticks (its admission if never busy).
    idle_since: u64,
    /// Has carried the token: shed after every connection that has not.
    trusted: bool,
}

#[derive(Default)]
struct State {
    conns: HashMap<u64, Conn>,
    next_id: u64,
    /// Ticks on every admission and every end of a request: orders idleness without a clock.
    clock: u64,
    /// Busy requests of class [`Class::Other`].
    busy_other: usize,
}

/// Shared by the accept loop and every connection.
#[derive(Clone)]
pub struct Budget {
    state: Arc<Mutex<State>>,
    max: usize,
    unproven: usize,
}

/// A connection's place in the budget, held by its task; dropped, the slot is free.
pub struct Ticket {
    budget: Budget,
    id: u64,
    /// Notified when the connection is shed.
    pub close: Arc<Notify>,
}

/// A request being answered; dropped once its answer is made, the connection is idle again.
pub struct Busy {
    budget: Budget,
    id: u64,
}

/// Why a request is not served.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The connection was shed between its head and now.
    Shed,
    /// [`UNPROVEN`] requests of anyone without the token are being answered.
    Full,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(MAX_CONNECTIONS, UNPROVEN)
    }
}

impl Budget {
    pub fn new(max: usize, unproven: usize) -> Budget {
        Budget { state: Arc::default(), max, unproven }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a new connection, and how many idle ones were closed for it; None when every
    /// connection held is busy (the new one is then closed).
    pub fn admit(&self) -> (Option<Ticket>, u64) {
        let mut s = self.lock();
        let mut shed = 0;
        while s.conns.len() >= self.max {
            // The longest idle of those that never carried the token, else of all.
            let victim = s
                .conns
                .iter()
                .filter(|(_, c)| c.busy.is_none())
                .min_by_key(|(id, c)| (c.trusted, c.idle_since, **id))
                .map(|(id, _)| *id);
            let Some(victim) = victim else { return (None, shed) };
            if let Some(c) = s.conns.remove(&victim) {
                c.close.notify_one();
            }
            shed += 1;
        }
        let id = s.next_id;
        s.next_id += 1;
        s.clock += 1;
        let close = Arc::new(Notify::new());
        let idle_since = s.clock;
        s.conns.insert(id, Conn { close: close.clone(), busy: None, idle_since, trusted: false });
        (Some(Ticket { budget: self.clone(), id, close }), shed)
    }

    /// Connections held now.
    pub fn open(&self) -> usize {
        self.lock().conns.len()
    }
}

impl Ticket {
    /// The connection starts answering a request of `class`.
    pub fn begin(&self, class: Class) -> Result<Busy, Refused> {
        let mut s = self.budget.lock();
        let busy_other = s.busy_other;
        let Some(c) = s.conns.get_mut(&self.id) else { return Err(Refused::Shed) };
        if class == Class::Other && busy_other >= self.budget.unproven {
            return Err(Refused::Full);
        }
        c.busy = Some(class);
        c.trusted |= class == Class::Token;
        if class == Class::Other {
            s.busy_other += 1;
        }
        Ok(Busy { budget: self.budget.clone(), id: self.id })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut s = self.budget.lock();
        if let Some(c) = s.conns.remove(&self.id)
            && c.busy == Some(Class::Other)
        {
            s.busy_other -= 1;
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut s = self.budget.lock();
        s.clock += 1;
        let now = s.clock;
        let Some(c) = s.conns.get_mut(&self.id) else { return };
        let was = c.busy.take();
        c.idle_since = now;
        if was == Some(Class::Other) {
            s.busy_other -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;

    /// Whether the ticket's connection was told to close (takes the notification: ask once).
    fn shed(t: &Ticket) -> bool {
        let f = t.close.notified();
        tokio::pin!(f);
        f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())).is_ready()
    }

    #[test]
    fn a_new_connection_sheds_the_longest_idle_untrusted_one() {
        let b = Budget::new(4, 2);
        let (a, _) = b.admit();
        let a = a.unwrap();
        // `a` carried the token once: kept over those that never did.
        drop(a.begin(Class::Token).unwrap());
        let conns: Vec<Ticket> = (0..3).map(|_| b.admit().0.unwrap()).collect();
        assert_eq!(b.open(), 4);
        // A probe arrives: the oldest idle untrusted connection (conns[0]) makes room.
        let (probe, n) = b.admit();
        let probe = probe.unwrap();
        assert_eq!(n, 1);
        assert!(shed(&conns[0]) && !shed(&conns[1]) && !shed(&a));
        assert_eq!(conns[0].begin(Class::Probe).err(), Some(Refused::Shed));
        let busy = probe.begin(Class::Probe).unwrap();
        // The busy probe is never shed; the next idle ones are, the trusted one last.
        let _n1 = b.admit().0.unwrap();
        assert!(shed(&conns[1]));
        let _n2 = b.admit().0.unwrap();
        assert!(shed(&conns[2]));
        assert!(!shed(&a));
        drop(busy);
        assert_eq!(b.open(), 4);
    }

    #[test]
    fn requests_without_the_token_take_at_most_the_unreserved_share() {
        let b = Budget::new(4, 2);
        let t: Vec<Ticket> = (0..4).map(|_| b.admit().0.unwrap()).collect();
        let x = t[0].begin(Class::Other).unwrap();
        let _y = t[1].begin(Class::Other).unwrap();
        assert_eq!(t[2].begin(Class::Other).err(), Some(Refused::Full));
        // The reserved slots still serve the probe and the registry.
        let _p = t[2].begin(Class::Probe).unwrap();
        let _r = t[3].begin(Class::Token).unwrap();
        // Every connection busy: a new one is refused, none shed.
        assert_eq!(b.admit().1, 0);
        assert!(b.admit().0.is_none());
        drop(x);
        let z = t[0].begin(Class::Other).unwrap();
        drop(z);
        // A connection closed while busy gives its share back.
        let w = t[0].begin(Class::Other).unwrap();
        drop(t);
        drop(w);
        assert_eq!(b.open(), 0);
        let t2: Vec<Ticket> = (0..2).map(|_| b.admit().0.unwrap()).collect();
        let _a = t2[0].begin(Class::Other).unwrap();
        let _b = t2[1].begin(Class::Other).unwrap();
    }
}
