//! Message matching: the unexpected-message queue and the posted receives of one rank.
//!
//! The rules are MPI's. A posted receive takes the oldest queued message it matches; a message
//! that arrives goes to the oldest posted receive it matches, else to the queue. Since both sides
//! keep arrival and posting order, messages from one sender with one tag never overtake each
//! other. Probes look only at queued (not yet matched) messages.

use std::collections::{HashMap, VecDeque};
use std::fs::File;

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
}

/// Where a queued message's bytes are.
#[derive(Debug)]
pub(crate) enum Body {
    /// In memory.
    Mem(Payload),
    /// In an (unlinked) spill file, read back when received.
    Disk(File),
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

    fn matched_by(&self, p: &Pattern) -> bool {
        p.matches_header(self.context, self.source, self.tag)
    }

    /// The message as an envelope, reading a spilled body back (consume-once).
    pub(crate) fn into_envelope(self) -> std::io::Result<Envelope> {
        let payload = match self.body {
            Body::Mem(p) => p,
            Body::Disk(file) => {
                use std::os::unix::fs::FileExt;
                let mut buf = AlignedBuf::zeroed(self.len);
                file.read_exact_at(buf.as_bytes_mut(), 0)?;
                Payload::Owned(buf)
            }
        };
        Ok(Envelope {
            context: self.context,
            source: self.source,
            tag: self.tag,
            payload,
        })
    }
}

/// Handle of a posted receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// Where a delivered message went.
pub(crate) enum Delivered {
    /// It completed this posted receive.
    Matched(RecvId),
    /// It was queued as unexpected; carries what a probe would see.
    Queued(MessageInfo, u64),
}

#[derive(Default)]
pub(crate) struct Mailbox {
    unexpected: VecDeque<Msg>,
    posted: VecDeque<(RecvId, Pattern)>,
    completed: HashMap<RecvId, Msg>,
    next_id: u64,
}

impl Mailbox {
    pub(crate) fn deliver(&mut self, env: Msg) -> Delivered {
        if let Some(i) = self.posted.iter().position(|(_, p)| env.matched_by(p)) {
            let (id, _) = self.posted.remove(i).expect("index from position");
            self.completed.insert(id, env);
            return Delivered::Matched(id);
        }
        let info = MessageInfo {
            source: env.source,
            tag: env.tag,
            bytes: env.len,
        };
        let context = env.context;
        self.unexpected.push_back(env);
        Delivered::Queued(info, context)
    }

    /// Posts a receive; it completes at once if a queued message matches.
    pub(crate) fn post(&mut self, pattern: Pattern) -> RecvId {
        let id = RecvId(self.next_id);
        self.next_id += 1;
        if let Some(i) = self.unexpected.iter().position(|e| e.matched_by(&pattern)) {
            let env = self.unexpected.remove(i).expect("index from position");
            self.completed.insert(id, env);
        } else {
            self.posted.push_back((id, pattern));
        }
        id
    }

    pub(crate) fn take(&mut self, id: RecvId) -> Option<Msg> {
        self.completed.remove(&id)
    }

    pub(crate) fn pattern_of(&self, id: RecvId) -> Option<Pattern> {
        self.posted.iter().find(|(i, _)| *i == id).map(|(_, p)| *p)
    }

    /// Withdraws a receive. A message it had already matched goes back to the front of the
    /// queue so no data is lost.
    pub(crate) fn cancel(&mut self, id: RecvId) {
        if let Some(i) = self.posted.iter().position(|(i, _)| *i == id) {
            self.posted.remove(i);
        } else if let Some(env) = self.completed.remove(&id) {
            self.unexpected.push_front(env);
        }
    }

    /// Whether every pattern matches some queued message (patterns are meant to be disjoint).
    pub(crate) fn all_present(&self, patterns: &[Pattern]) -> bool {
        patterns
            .iter()
            .all(|p| self.unexpected.iter().any(|e| e.matched_by(p)))
    }

    /// The index of the first pattern that matches some queued message.
    pub(crate) fn any_present(&self, patterns: &[Pattern]) -> Option<usize> {
        patterns
            .iter()
            .position(|p| self.unexpected.iter().any(|e| e.matched_by(p)))
    }

    pub(crate) fn probe(&self, pattern: &Pattern) -> Option<MessageInfo> {
        self.unexpected
            .iter()
            .find(|e| e.matched_by(pattern))
            .map(|e| MessageInfo {
                source: e.source,
                tag: e.tag,
                bytes: e.len,
            })
    }

    /// Messages waiting and receives posted, for reports.
    pub(crate) fn pending(&self) -> (usize, usize) {
        (self.unexpected.len(), self.posted.len())
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
        let b = m.post(pat(None, None));
        assert!(matches!(m.deliver(env(1, 0, 10)), Delivered::Matched(id) if id == a));
        assert!(matches!(m.deliver(env(2, 0, 20)), Delivered::Matched(id) if id == b));
        assert_eq!(bytes(m.take(a)), [10]);
        assert_eq!(bytes(m.take(b)), [20]);
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
    }

    #[test]
    fn other_contexts_never_match_and_cancel_keeps_data() {
        let mut m = Mailbox::default();
        let mut e = env(1, 0, 9);
        e.context = 8;
        m.deliver(e);
        let id = m.post(pat(None, None));
        assert!(m.take(id).is_none());
        m.cancel(id);
        m.deliver(env(2, 0, 4));
        let id = m.post(pat(Some(2), None));
        m.cancel(id);
        assert_eq!(m.probe(&pat(None, None)).unwrap().source, 2);
        assert_eq!(m.pending(), (2, 0));
    }
}
