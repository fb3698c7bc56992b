//! Message matching: the unexpected-message queue and the posted receives of one rank.
//!
//! The rules are MPI's. A posted receive takes the oldest queued message it matches; a message
//! that arrives goes to the oldest posted receive it matches, else to the queue. Since both sides
//! keep arrival and posting order, messages from one sender with one tag never overtake each
//! other. Probes look only at queued (not yet matched) messages.

use std::collections::{HashMap, VecDeque};

use spillway_transport::Envelope;

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
        env.context == self.context
            && self.source.is_none_or(|s| s == env.source)
            && self.tag.is_none_or(|t| t == env.tag)
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
    unexpected: VecDeque<Envelope>,
    posted: VecDeque<(RecvId, Pattern)>,
    completed: HashMap<RecvId, Envelope>,
    next_id: u64,
}

impl Mailbox {
    pub(crate) fn deliver(&mut self, env: Envelope) -> Delivered {
        if let Some(i) = self.posted.iter().position(|(_, p)| p.matches(&env)) {
            let (id, _) = self.posted.remove(i).expect("index from position");
            self.completed.insert(id, env);
            return Delivered::Matched(id);
        }
        let info = MessageInfo {
            source: env.source,
            tag: env.tag,
            bytes: env.payload.len(),
        };
        let context = env.context;
        self.unexpected.push_back(env);
        Delivered::Queued(info, context)
    }

    /// Posts a receive; it completes at once if a queued message matches.
    pub(crate) fn post(&mut self, pattern: Pattern) -> RecvId {
        let id = RecvId(self.next_id);
        self.next_id += 1;
        if let Some(i) = self.unexpected.iter().position(|e| pattern.matches(e)) {
            let env = self.unexpected.remove(i).expect("index from position");
            self.completed.insert(id, env);
        } else {
            self.posted.push_back((id, pattern));
        }
        id
    }

    pub(crate) fn take(&mut self, id: RecvId) -> Option<Envelope> {
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

    pub(crate) fn probe(&self, pattern: &Pattern) -> Option<MessageInfo> {
        self.unexpected
            .iter()
            .find(|e| pattern.matches(e))
            .map(|e| MessageInfo {
                source: e.source,
                tag: e.tag,
                bytes: e.payload.len(),
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
    use spillway_transport::{AlignedBuf, Payload};

    fn env(source: u32, tag: i32, byte: u8) -> Envelope {
        Envelope {
            context: 7,
            source,
            tag,
            payload: Payload::Owned(AlignedBuf::from_bytes(&[byte])),
        }
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
        assert_eq!(m.take(a).unwrap().payload.as_bytes(), &[10]);
        assert_eq!(m.take(b).unwrap().payload.as_bytes(), &[20]);
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
        assert_eq!(m.take(x).unwrap().payload.as_bytes(), &[2]);
        assert_eq!(m.take(y).unwrap().payload.as_bytes(), &[1]);
        assert_eq!(m.take(z).unwrap().payload.as_bytes(), &[3]);
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
