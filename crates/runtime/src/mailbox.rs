//! Message matching: the unexpected-message queue and the posted receives of one rank.
//!
//! The rules are MPI's. A posted receive takes the oldest queued message it matches; a message
//! that arrives goes to the oldest posted receive it matches, else to the queue. Since both sides
//! keep arrival and posting order, messages from one sender with one tag never overtake each
//! other. Probes look only at queued (not yet matched) messages.
//!
//! Both sides are indexed by the exact key (context, source, tag), so the common case — a
//! receive naming its source and tag — costs O(1) whatever else is queued. Wildcard receives
//! and probes scan only the messages of their context, in arrival order.

use crate::memory::Spilled;
use std::collections::{BTreeMap, HashMap, VecDeque};

use spillway_transport::{AlignedBuf, Envelope, Payload};

/// What a receive or probe matches: one context exactly, a source and a tag or any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// Communication context.
    pub context: u64,
    /// Global rank of the sender, or any (`None`).
    pub source: Option<u32>,
    /// Tag, or any (`None`).
    pub tag: Option<i32>,
}

impl Pattern {
    /// Whether `env` matches.
    pub fn matches(&self, env: &Envelope) -> bool {
        self.matches_header(env.context, env.source, env.tag)
    }

    pub(crate) fn matches_header(&self, context: u64, source: u32, tag: i32) -> bool {
        context == self.context
            && self.source.is_none_or(|s| s == source)
            && self.tag.is_none_or(|t| t == tag)
    }

    fn exact_key(&self) -> Option<Key> {
        Some((self.context, self.source?, self.tag?))
    }

    pub(crate) fn describe(&self) -> String {
        let source = match self.source {
            Some(s) => format!("from rank {s}"),
            None => "from any rank".to_string(),
        };
        let tag = match self.tag {
            Some(t) => format!("tag {t}"),
            None => "any tag".to_string(),
        };
        format!("{source} with {tag} in context {:#x}", self.context)
    }
}

type Key = (u64, u32, i32);

/// Where a queued message's bytes are.
#[derive(Debug)]
pub(crate) enum Body {
    /// In memory.
    Mem(Payload),
    /// In storage (the receiver's message log, read ahead before it resumes), read back when
    /// received.
    Disk(Spilled),
    /// Already in the buffer the receive was posted with (at this address): the engine wrote
    /// it there (a claimed receive).
    InPlace(usize),
}

/// A message held by a mailbox.
#[derive(Debug)]
pub(crate) struct Msg {
    pub(crate) context: u64,
    pub(crate) source: u32,
    pub(crate) tag: i32,
    pub(crate) len: usize,
    pub(crate) body: Body,
}

impl Msg {
    pub(crate) fn in_memory(env: Envelope) -> Msg {
        Msg {
            context: env.context,
            source: env.source,
            tag: env.tag,
            len: env.payload.len(),
            body: Body::Mem(env.payload),
        }
    }

    fn key(&self) -> Key {
        (self.context, self.source, self.tag)
    }

    pub(crate) fn info(&self) -> MessageInfo {
        MessageInfo {
            source: self.source,
            tag: self.tag,
            bytes: self.len,
        }
    }

    /// The message as an envelope, reading a spilled body back (consume-once).
    pub(crate) fn into_envelope(self) -> std::io::Result<Envelope> {
        let payload = match self.body {
            Body::Mem(p) => p,
            Body::Disk(spilled) => {
                let mut buf = AlignedBuf::for_overwrite(self.len);
                spilled.read_into(buf.as_bytes_mut())?;
                Payload::Owned(buf)
            }
            Body::InPlace(_) => {
                // Only receives into a caller's buffer are posted with one, and they read
                // with `read_into`.
                return Err(std::io::Error::other(
                    "a message received in place has no envelope",
                ));
            }
        };
        Ok(Envelope {
            context: self.context,
            source: self.source,
            tag: self.tag,
            payload,
        })
    }

    /// Copies the body into `dst` (which holds at least `len` bytes): one copy from memory, or
    /// one read straight from the spill file.
    pub(crate) fn read_into(&self, dst: &mut [u8]) -> std::io::Result<()> {
        let dst = &mut dst[..self.len];
        match &self.body {
            Body::Mem(p) => dst.copy_from_slice(p.as_bytes()),
            Body::Disk(spilled) => spilled.read_into(dst)?,
            Body::InPlace(at) => {
                if *at != dst.as_ptr() as usize {
                    return Err(std::io::Error::other(
                        "a message received in place was read into another buffer",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Handle of a posted receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecvId(pub(crate) u64);

/// What a probe reports about a queued message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInfo {
    /// Global rank of the sender.
    pub source: u32,
    /// Tag.
    pub tag: i32,
    /// Payload length in bytes.
    pub bytes: usize,
}

/// What the mailbox's owner waits for.
#[derive(Debug, Clone)]
pub(crate) enum MailWait {
    Recv(RecvId),
    Probe(Pattern),
    /// All of these receives (or, with `any`, one of them).
    Group {
        ids: Vec<RecvId>,
        any: bool,
    },
}

struct Queued {
    seq: u64,
    msg: Msg,
}

#[derive(Default)]
pub(crate) struct Mailbox {
    /// Unexpected messages by exact key, oldest first.
    queued: HashMap<Key, VecDeque<Queued>>,
    /// The unexpected messages of each context in arrival order: (source, tag) by sequence.
    by_context: HashMap<u64, BTreeMap<u64, (u32, i32)>>,
    queued_count: usize,
    next_seq: u64,
    /// Posted receives with an exact pattern, oldest first.
    posted_exact: HashMap<Key, VecDeque<RecvId>>,
    /// Posted receives with a wildcard, in posting order.
    posted_wild: BTreeMap<RecvId, Pattern>,
    posted: HashMap<RecvId, Pattern>,
    /// Matched messages not yet taken, with their arrival numbers.
    completed: HashMap<RecvId, (u64, Msg)>,
    /// The buffer (address, capacity) of receives posted with one.
    buffers: HashMap<RecvId, (usize, usize)>,
    /// Receives reserved for a message being written into their buffer: arrival number and
    /// the message's (context, source, tag, length).
    claimed: HashMap<RecvId, (u64, Key, usize)>,
    next_id: u64,
    waiting: Option<MailWait>,
}

impl Mailbox {
    /// Delivers a message; returns whether the owner waits for it and must be woken.
    /// The posted receive a message with `key` matches now (the oldest that matches), and
    /// whether it is an exact one.
    fn matching(&self, key: Key) -> Option<(RecvId, bool)> {
        let exact = self.posted_exact.get(&key).and_then(|q| q.front().copied());
        let wild = self
            .posted_wild
            .iter()
            .find(|(_, p)| p.matches_header(key.0, key.1, key.2))
            .map(|(&id, _)| id);
        match (exact, wild) {
            (Some(a), Some(b)) if b < a => Some((b, false)),
            (Some(a), _) => Some((a, true)),
            (None, Some(b)) => Some((b, false)),
            (None, None) => None,
        }
    }

    /// Withdraws the chosen posted receive from the lists that messages match against.
    fn unpost(&mut self, id: RecvId, exact: bool, key: Key) {
        if exact {
            let q = self.posted_exact.get_mut(&key).expect("posted queue");
            q.pop_front();
            if q.is_empty() {
                self.posted_exact.remove(&key);
            }
        } else {
            self.posted_wild.remove(&id);
        }
        self.posted.remove(&id);
    }

    pub(crate) fn deliver(&mut self, msg: Msg) -> bool {
        let key = msg.key();
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some((id, exact)) = self.matching(key) {
            self.unpost(id, exact, key);
            self.buffers.remove(&id);
            self.completed.insert(id, (seq, msg));
            return self.completion_wakes(id);
        }
        self.enqueue(seq, msg);
        match &self.waiting {
            Some(MailWait::Probe(p)) if p.matches_header(key.0, key.1, key.2) => {
                self.waiting = None;
                true
            }
            _ => false,
        }
    }

    fn enqueue(&mut self, seq: u64, msg: Msg) {
        let key = msg.key();
        let q = self.queued.entry(key).or_default();
        // Usually appended; a message put back by `cancel` goes to its place by arrival.
        let at = q.iter().rposition(|m| m.seq < seq).map_or(0, |i| i + 1);
        q.insert(at, Queued { seq, msg });
        self.by_context
            .entry(key.0)
            .or_default()
            .insert(seq, (key.1, key.2));
        self.queued_count += 1;
    }

    fn completion_wakes(&mut self, id: RecvId) -> bool {
        let wake = match &self.waiting {
            Some(MailWait::Recv(w)) => *w == id,
            Some(MailWait::Group { ids, any }) => {
                ids.contains(&id) && (*any || ids.iter().all(|i| self.completed.contains_key(i)))
            }
            _ => false,
        };
        if wake {
            self.waiting = None;
        }
        wake
    }

    /// The key and arrival number of the oldest queued message matching `pattern`.
    fn find_queued(&self, pattern: &Pattern) -> Option<(Key, u64)> {
        if let Some(key) = pattern.exact_key() {
            return self
                .queued
                .get(&key)
                .and_then(|q| q.front())
                .map(|m| (key, m.seq));
        }
        let order = self.by_context.get(&pattern.context)?;
        order
            .iter()
            .find(|(_, &(s, t))| pattern.matches_header(pattern.context, s, t))
            .map(|(&seq, &(s, t))| ((pattern.context, s, t), seq))
    }

    fn take_queued(&mut self, pattern: &Pattern) -> Option<(u64, Msg)> {
        let (key, seq) = self.find_queued(pattern)?;
        let q = self.queued.get_mut(&key).expect("queue of a found message");
        let m = q.pop_front().expect("found message");
        debug_assert_eq!(m.seq, seq);
        if q.is_empty() {
            self.queued.remove(&key);
        }
        let order = self.by_context.get_mut(&key.0).expect("context order");
        order.remove(&seq);
        if order.is_empty() {
            self.by_context.remove(&key.0);
        }
        self.queued_count -= 1;
        Some((m.seq, m.msg))
    }

    /// Posts a receive; it completes at once if a queued message matches.
    pub(crate) fn post(&mut self, pattern: Pattern) -> RecvId {
        let id = RecvId(self.next_id);
        self.next_id += 1;
        if let Some(found) = self.take_queued(&pattern) {
            self.completed.insert(id, found);
            return id;
        }
        match pattern.exact_key() {
            Some(key) => self.posted_exact.entry(key).or_default().push_back(id),
            None => {
                self.posted_wild.insert(id, pattern);
            }
        }
        self.posted.insert(id, pattern);
        id
    }

    /// Posts a receive with the owner's buffer (`cap` bytes at `addr`), into which the engine
    /// may write a large message from another process directly ([`claim`](Self::claim)).
    pub(crate) fn post_into(&mut self, pattern: Pattern, addr: usize, cap: usize) -> RecvId {
        let id = self.post(pattern);
        if self.posted.contains_key(&id) {
            self.buffers.insert(id, (addr, cap));
        }
        id
    }

    /// Reserves, for a message with `key` and `len` bytes whose header has arrived, the
    /// receive it matches now if that receive has a buffer of at least `len` bytes; returns
    /// the receive and where the bytes go. The message counts as arrived now.
    pub(crate) fn claim(&mut self, key: Key, len: usize) -> Option<(RecvId, usize)> {
        let (id, exact) = self.matching(key)?;
        let &(addr, cap) = self.buffers.get(&id)?;
        if len > cap {
            return None;
        }
        self.unpost(id, exact, key);
        self.buffers.remove(&id);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.claimed.insert(id, (seq, key, len));
        Some((id, addr))
    }

    /// Whether the owner is ready for a message with `key` and `len` bytes whose header has
    /// arrived: a receive with a buffer that fits matches it ([`Expect::Buffer`]), a receive
    /// without one matches it or the owner is blocked ([`Expect::Mailbox`]), or neither
    /// ([`Expect::Unknown`]).
    ///
    /// [`Expect::Buffer`]: spillway_transport::Expect::Buffer
    /// [`Expect::Mailbox`]: spillway_transport::Expect::Mailbox
    /// [`Expect::Unknown`]: spillway_transport::Expect::Unknown
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn expects(&self, key: Key, len: usize) -> spillway_transport::Expect {
        use spillway_transport::Expect;
        match self.matching(key) {
            Some((id, _)) => match self.buffers.get(&id) {
                Some(&(_, cap)) if len <= cap => Expect::Buffer,
                _ => Expect::Mailbox,
            },
            None if self.waiting.is_some() => Expect::Mailbox,
            None => Expect::Unknown,
        }
    }

    /// The bytes of a claimed receive are in its buffer (`ok`), or the transfer was abandoned
    /// (the job fails; the receive ends without a message). Returns whether the owner must be
    /// woken.
    pub(crate) fn complete_claim(&mut self, id: RecvId, addr: usize, ok: bool) -> bool {
        let Some((seq, key, len)) = self.claimed.remove(&id) else {
            return false;
        };
        if ok {
            let msg = Msg {
                context: key.0,
                source: key.1,
                tag: key.2,
                len,
                body: Body::InPlace(addr),
            };
            self.completed.insert(id, (seq, msg));
            return self.completion_wakes(id);
        }
        let wake = matches!(&self.waiting, Some(MailWait::Recv(w)) if *w == id);
        if wake {
            self.waiting = None;
        }
        wake
    }

    /// Whether the engine is writing a message into the receive's buffer.
    pub(crate) fn is_claimed(&self, id: RecvId) -> bool {
        self.claimed.contains_key(&id)
    }

    /// Takes the message of a completed receive.
    pub(crate) fn take(&mut self, id: RecvId) -> Option<Msg> {
        self.completed.remove(&id).map(|(_, m)| m)
    }

    /// Whether a posted receive has its message.
    pub(crate) fn is_complete(&self, id: RecvId) -> bool {
        self.completed.contains_key(&id)
    }

    pub(crate) fn pattern_of(&self, id: RecvId) -> Option<Pattern> {
        self.posted.get(&id).copied()
    }

    /// Withdraws a receive. A message it had already matched goes back to the queue, in its
    /// place by arrival, so no data is lost.
    pub(crate) fn cancel(&mut self, id: RecvId) {
        self.buffers.remove(&id);
        debug_assert!(
            !self.claimed.contains_key(&id),
            "cancel of a claimed receive"
        );
        if let Some(p) = self.posted.remove(&id) {
            match p.exact_key() {
                Some(key) => {
                    if let Some(q) = self.posted_exact.get_mut(&key) {
                        q.retain(|&i| i != id);
                        if q.is_empty() {
                            self.posted_exact.remove(&key);
                        }
                    }
                }
                None => {
                    self.posted_wild.remove(&id);
                }
            }
        } else if let Some((seq, msg)) = self.completed.remove(&id) {
            // A message written into the owner's buffer cannot go back to the queue: its
            // receive is given up only when the job aborts.
            if !matches!(msg.body, Body::InPlace(_)) {
                self.enqueue(seq, msg);
            }
        }
    }

    pub(crate) fn probe(&self, pattern: &Pattern) -> Option<MessageInfo> {
        let (key, _) = self.find_queued(pattern)?;
        self.queued
            .get(&key)
            .and_then(|q| q.front())
            .map(|m| m.msg.info())
    }

    /// Registers the owner's wait; the caller has checked that it is not satisfied.
    pub(crate) fn set_waiting(&mut self, wait: MailWait) {
        self.waiting = Some(wait);
    }

    pub(crate) fn clear_waiting(&mut self) {
        self.waiting = None;
    }

    /// Messages waiting and receives posted, for reports.
    pub(crate) fn pending(&self) -> (usize, usize) {
        (self.queued_count, self.posted.len() + self.claimed.len())
    }

    /// What the owner waits for, for deadlock reports.
    pub(crate) fn describe_wait(&self) -> String {
        let what = match &self.waiting {
            Some(MailWait::Recv(id)) => match self.pattern_of(*id) {
                Some(p) => format!("a message {}", p.describe()),
                None if self.claimed.contains_key(id) => {
                    "the rest of a message from another node".to_string()
                }
                None => "a message".to_string(),
            },
            Some(MailWait::Probe(p)) => format!("a message {} (probe)", p.describe()),
            Some(MailWait::Group { ids, any }) => {
                let missing: Vec<String> = ids
                    .iter()
                    .filter(|i| !self.completed.contains_key(i))
                    .filter_map(|i| self.pattern_of(*i))
                    .map(|p| p.describe())
                    .collect();
                let head = if *any {
                    "one of several messages"
                } else {
                    "several messages"
                };
                format!("{head}, missing: {}", missing.join("; "))
            }
            None => "a message".to_string(),
        };
        let (queued, _) = self.pending();
        format!("{what}; {queued} unmatched message(s) queued")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(source: u32, tag: i32, byte: u8) -> Msg {
        Msg::in_memory(Envelope {
            context: 7,
            source,
            tag,
            payload: Payload::Owned(AlignedBuf::from_bytes(&[byte])),
        })
    }

    fn bytes(m: Option<Msg>) -> Vec<u8> {
        m.unwrap()
            .into_envelope()
            .unwrap()
            .payload
            .as_bytes()
            .to_vec()
    }

    fn pat(source: Option<u32>, tag: Option<i32>) -> Pattern {
        Pattern {
            context: 7,
            source,
            tag,
        }
    }

    #[test]
    fn posted_receives_match_in_posting_order() {
        let mut m = Mailbox::default();
        let a = m.post(pat(None, None));
        let b = m.post(pat(Some(2), Some(0)));
        let c = m.post(pat(None, None));
        m.deliver(env(2, 0, 20));
        m.deliver(env(1, 0, 10));
        m.deliver(env(2, 0, 30));
        // The wildcard posted first takes the first message, the exact one the third.
        assert_eq!(bytes(m.take(a)), [20]);
        assert_eq!(bytes(m.take(c)), [10]);
        assert_eq!(bytes(m.take(b)), [30]);
    }

    #[test]
    fn queued_messages_match_oldest_first_and_respect_tags() {
        let mut m = Mailbox::default();
        m.deliver(env(1, 5, 1));
        m.deliver(env(1, 6, 2));
        m.deliver(env(1, 5, 3));
        let x = m.post(pat(Some(1), Some(6)));
        let y = m.post(pat(Some(1), Some(5)));
        let z = m.post(pat(Some(1), None));
        assert_eq!(bytes(m.take(x)), [2]);
        assert_eq!(bytes(m.take(y)), [1]);
        assert_eq!(bytes(m.take(z)), [3]);
        assert_eq!(m.pending(), (0, 0));
    }

    #[test]
    fn other_contexts_never_match_and_cancel_keeps_data_in_order() {
        let mut m = Mailbox::default();
        let mut e = env(1, 0, 9);
        e.context = 8;
        m.deliver(e);
        let id = m.post(pat(None, None));
        assert!(m.take(id).is_none());
        m.cancel(id);
        m.deliver(env(2, 0, 4));
        m.deliver(env(2, 0, 5));
        let id = m.post(pat(Some(2), None));
        assert!(m.is_complete(id));
        m.cancel(id);
        // The cancelled match went back in front of the later message from the same sender.
        assert_eq!(m.probe(&pat(None, None)).unwrap().source, 2);
        let again = m.post(pat(Some(2), Some(0)));
        assert_eq!(bytes(m.take(again)), [4]);
        assert_eq!(m.pending(), (2, 0));
    }

    #[test]
    fn waits_wake_only_when_satisfied() {
        let mut m = Mailbox::default();
        let a = m.post(pat(Some(1), Some(0)));
        let b = m.post(pat(Some(2), Some(0)));
        m.set_waiting(MailWait::Group {
            ids: vec![a, b],
            any: false,
        });
        assert!(!m.deliver(env(1, 0, 1)));
        assert!(!m.deliver(env(3, 0, 1)));
        assert!(m.deliver(env(2, 0, 1)));
        m.set_waiting(MailWait::Probe(pat(Some(4), None)));
        assert!(!m.deliver(env(3, 1, 1)));
        assert!(m.deliver(env(4, 1, 1)));
    }

    #[test]
    fn expects_tells_buffers_plain_receives_and_blocked_owners_apart() {
        use spillway_transport::Expect;
        let mut m = Mailbox::default();
        let key = (7, 1, 0);
        assert_eq!(m.expects(key, 100), Expect::Unknown);
        let mut buf = [0u8; 64];
        let id = m.post_into(pat(Some(1), Some(0)), buf.as_mut_ptr() as usize, buf.len());
        assert_eq!(m.expects(key, 64), Expect::Buffer);
        // Too long for the posted buffer: it must be received by the engine.
        assert_eq!(m.expects(key, 65), Expect::Mailbox);
        // Other sources, tags and contexts do not match that receive.
        assert_eq!(m.expects((7, 2, 0), 10), Expect::Unknown);
        assert_eq!(m.expects((8, 1, 0), 10), Expect::Unknown);
        m.cancel(id);
        let plain = m.post(pat(None, Some(0)));
        assert_eq!(m.expects((7, 5, 0), 10), Expect::Mailbox);
        m.cancel(plain);
        // A blocked owner waits for something else (here a probe of another tag).
        m.set_waiting(MailWait::Probe(pat(Some(1), Some(3))));
        assert_eq!(m.expects(key, 10), Expect::Mailbox);
        m.clear_waiting();
        assert_eq!(m.expects(key, 10), Expect::Unknown);
    }
}
