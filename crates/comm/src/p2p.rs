//! Point-to-point communication.

use std::marker::PhantomData;

use bytemuck::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;
use spillway_runtime::{Envelope, RecvId, WaitKind};
use spillway_transport::{AlignedBuf, Payload};
use std::sync::Arc;

use crate::codec::{check_type, decode_obj, encode, encode_obj, view};
use crate::comm::Comm;
use crate::{Error, Result};

/// Which sender a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Any member (`MPI_ANY_SOURCE`).
    Any,
    /// The member with this communicator rank.
    Rank(usize),
}

impl From<usize> for Source {
    fn from(r: usize) -> Source {
        Source::Rank(r)
    }
}

/// Which tag a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Any tag (`MPI_ANY_TAG`).
    Any,
    /// This tag (non-negative).
    Value(i32),
}

impl From<i32> for Tag {
    fn from(t: i32) -> Tag {
        Tag::Value(t)
    }
}

/// What a completed receive or a probe reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Communicator rank of the sender.
    pub source: usize,
    /// The message's tag.
    pub tag: i32,
    /// Payload length in bytes.
    pub bytes: usize,
}

impl Status {
    /// Number of whole `T` elements in the message (`MPI_Get_count`).
    pub fn count<T>(&self) -> usize {
        self.bytes / std::mem::size_of::<T>().max(1)
    }
}

/// A send that has completed: sends are buffered, so `isend` returns a finished request. It
/// exists so that MPI-shaped code keeps its shape.
#[derive(Debug, Clone, Copy)]
#[must_use = "a request should be waited on"]
pub struct SendRequest(());

impl SendRequest {
    /// Always true: the data was buffered when the request was made.
    pub fn test(&self) -> bool {
        true
    }

    /// Returns at once.
    pub fn wait(self) {}
}

/// A posted receive of `T` elements.
///
/// Messages match posted receives in posting order. Dropping an unfinished request withdraws
/// the receive; a message it had already matched stays queued for later receives.
#[must_use = "a receive request does nothing unless waited on"]
pub struct RecvRequest<'c, 'r, T: Pod> {
    comm: &'c Comm<'r>,
    id: RecvId,
    done: bool,
    _t: PhantomData<T>,
}

impl<T: Pod> RecvRequest<'_, '_, T> {
    /// Completes the receive if the message has arrived (`MPI_Test`).
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] if the message is not a whole number of `T`.
    pub fn test(&mut self) -> Result<Option<(Vec<T>, Status)>> {
        if self.done {
            return Err(Error::InvalidArgument("request already completed"));
        }
        match self.comm.rank.test_recv(self.id)? {
            None => Ok(None),
            Some(env) => {
                self.done = true;
                self.comm.finish_vec(env).map(Some)
            }
        }
    }

    /// Blocks until the message arrives (`MPI_Wait`).
    ///
    /// # Errors
    /// [`Error::Aborted`] if the job ends while waiting; [`Error::TypeMismatch`] as for `test`.
    pub fn wait(mut self) -> Result<(Vec<T>, Status)> {
        if self.done {
            return Err(Error::InvalidArgument("request already completed"));
        }
        self.done = true;
        let env = self.comm.rank.wait_recv(self.id, WaitKind::Wait)?;
        self.comm.finish_vec(env)
    }
}

impl<T: Pod> Drop for RecvRequest<'_, '_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.comm.rank.cancel_recv(self.id);
        }
    }
}

/// Waits for every request, in order (`MPI_Waitall`).
///
/// # Errors
/// The first error of any request.
pub fn wait_all<T: Pod>(requests: Vec<RecvRequest<'_, '_, T>>) -> Result<Vec<(Vec<T>, Status)>> {
    requests.into_iter().map(RecvRequest::wait).collect()
}

impl<'r> Comm<'r> {
    fn check_dest(&self, dest: usize) -> Result<u32> {
        self.global_rank(dest)
    }

    fn check_tag(tag: i32) -> Result<()> {
        if tag < 0 {
            return Err(Error::InvalidArgument("tags must be non-negative"));
        }
        Ok(())
    }

    fn recv_pattern(&self, source: Source, tag: Tag) -> Result<spillway_runtime::Pattern> {
        let source = match source {
            Source::Any => None,
            Source::Rank(r) => Some(r),
        };
        let tag = match tag {
            Tag::Any => None,
            Tag::Value(t) => {
                Self::check_tag(t)?;
                Some(t)
            }
        };
        self.pattern(self.p2p_context(), source, tag)
    }

    fn status_of(&self, env: &Envelope) -> Status {
        Status {
            source: self.comm_rank_of(env.source),
            tag: env.tag,
            bytes: env.payload.len(),
        }
    }

    fn finish_vec<T: Pod>(&self, env: Envelope) -> Result<(Vec<T>, Status)> {
        let status = self.status_of(&env);
        let data = view::<T>(env.payload.as_bytes())?.to_vec();
        Ok((data, status))
    }

    /// Sends `data` to `dest` with `tag` (`MPI_Send`, buffered).
    ///
    /// # Semantics
    /// The data is copied into a message before the call returns; it never blocks.
    ///
    /// # Errors
    /// [`Error::InvalidRank`], a negative tag, or [`Error::Aborted`].
    pub fn send<T: Pod>(&self, dest: usize, tag: i32, data: &[T]) -> Result<()> {
        check_type::<T>()?;
        Self::check_tag(tag)?;
        let g = self.check_dest(dest)?;
        self.rank.post(g, self.p2p_context(), tag, encode(data))
    }

    /// Sends an owned buffer to `dest` with `tag`: the buffer becomes the message, without a
    /// copy (`send` of its bytes, with the buffer moved).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn send_buf(&self, dest: usize, tag: i32, buf: AlignedBuf) -> Result<()> {
        Self::check_tag(tag)?;
        let g = self.check_dest(dest)?;
        self.rank
            .post(g, self.p2p_context(), tag, Payload::Owned(buf))
    }

    /// Sends a shared buffer to `dest` with `tag` without copying it: the message holds a
    /// reference to it, and the caller may go on reading it (`send` of its bytes).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn send_shared(&self, dest: usize, tag: i32, buf: Arc<AlignedBuf>) -> Result<()> {
        Self::check_tag(tag)?;
        let g = self.check_dest(dest)?;
        self.rank
            .post(g, self.p2p_context(), tag, Payload::Shared(buf))
    }

    /// Sends any serialisable value.
    ///
    /// # Errors
    /// As [`send`](Self::send), or a value that cannot be serialised.
    pub fn send_obj<T: Serialize + ?Sized>(&self, dest: usize, tag: i32, value: &T) -> Result<()> {
        Self::check_tag(tag)?;
        let g = self.check_dest(dest)?;
        self.rank
            .post(g, self.p2p_context(), tag, encode_obj(value)?)
    }

    /// Non-blocking send (`MPI_Isend`): the data is buffered at once.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn isend<T: Pod>(&self, dest: usize, tag: i32, data: &[T]) -> Result<SendRequest> {
        self.send(dest, tag, data).map(|()| SendRequest(()))
    }

    /// Receives a message of `T` elements (`MPI_Recv`), blocking until one matches.
    ///
    /// # Errors
    /// [`Error::Aborted`], [`Error::InvalidRank`], [`Error::TypeMismatch`].
    pub fn recv<T: Pod>(
        &self,
        source: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<(Vec<T>, Status)> {
        check_type::<T>()?;
        let pattern = self.recv_pattern(source.into(), tag.into())?;
        let env = self.rank.recv(pattern, WaitKind::Recv)?;
        self.finish_vec(env)
    }

    /// Receives a message as the buffer that carried it, shared and without a copy when the
    /// message arrived whole (a message larger than the memory budget, or sliced from a
    /// collective's buffer, is copied once).
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn recv_shared(
        &self,
        source: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<(Arc<AlignedBuf>, Status)> {
        let pattern = self.recv_pattern(source.into(), tag.into())?;
        let env = self.rank.recv(pattern, WaitKind::Recv)?;
        let status = self.status_of(&env);
        Ok((env.payload.into_shared(), status))
    }

    /// Receives into `buf`; the message may be shorter than the buffer.
    ///
    /// # Errors
    /// As [`recv`](Self::recv), and [`Error::Truncated`] for a longer message (the message is
    /// consumed, as in MPI).
    pub fn recv_into<T: Pod>(
        &self,
        source: impl Into<Source>,
        tag: impl Into<Tag>,
        buf: &mut [T],
    ) -> Result<Status> {
        check_type::<T>()?;
        let pattern = self.recv_pattern(source.into(), tag.into())?;
        let info = self
            .rank
            .recv_into(pattern, WaitKind::Recv, bytemuck::cast_slice_mut(buf))?;
        if info.bytes % std::mem::size_of::<T>() != 0 {
            return Err(Error::TypeMismatch {
                expected: std::any::type_name::<T>(),
                message_bytes: info.bytes,
            });
        }
        Ok(Status {
            source: self.comm_rank_of(info.source),
            tag: info.tag,
            bytes: info.bytes,
        })
    }

    /// Receives a serialised value sent with [`send_obj`](Self::send_obj).
    ///
    /// # Errors
    /// As [`recv`](Self::recv).
    pub fn recv_obj<T: DeserializeOwned>(
        &self,
        source: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<(T, Status)> {
        let pattern = self.recv_pattern(source.into(), tag.into())?;
        let env = self.rank.recv(pattern, WaitKind::Recv)?;
        let status = self.status_of(&env);
        Ok((decode_obj(env.payload.as_bytes())?, status))
    }

    /// Posts a receive (`MPI_Irecv`); complete it with `test`, `wait` or [`wait_all`].
    ///
    /// # Errors
    /// [`Error::InvalidRank`] or a negative tag.
    pub fn irecv<'c, T: Pod>(
        &'c self,
        source: impl Into<Source>,
        tag: impl Into<Tag>,
    ) -> Result<RecvRequest<'c, 'r, T>> {
        check_type::<T>()?;
        let pattern = self.recv_pattern(source.into(), tag.into())?;
        Ok(RecvRequest {
            comm: self,
            id: self.rank.post_recv(pattern),
            done: false,
            _t: PhantomData,
        })
    }

    /// Sends and receives in one call (`MPI_Sendrecv`); cannot deadlock since sends buffer.
    ///
    /// # Errors
    /// As [`send`](Self::send) and [`recv`](Self::recv).
    pub fn sendrecv<T: Pod, U: Pod>(
        &self,
        data: &[T],
        dest: usize,
        send_tag: i32,
        source: impl Into<Source>,
        recv_tag: impl Into<Tag>,
    ) -> Result<(Vec<U>, Status)> {
        self.send(dest, send_tag, data)?;
        self.recv(source, recv_tag)
    }

    /// The runtime pattern of a receive from `source` with `tag` on this communicator, for
    /// callers that keep posted receives beyond a borrow of the communicator (a C binding
    /// whose requests live in a table): post it with [`Rank::post_recv`], complete it with
    /// [`Rank::wait_recv`] or [`Rank::test_recv`], and describe the message with
    /// [`status_of_message`](Self::status_of_message).
    ///
    /// [`Rank::post_recv`]: spillway_runtime::Rank::post_recv
    /// [`Rank::wait_recv`]: spillway_runtime::Rank::wait_recv
    /// [`Rank::test_recv`]: spillway_runtime::Rank::test_recv
    ///
    /// # Errors
    /// [`Error::InvalidRank`] or a negative tag.
    pub fn p2p_pattern(&self, source: Source, tag: Tag) -> Result<spillway_runtime::Pattern> {
        self.recv_pattern(source, tag)
    }

    /// The status of a message of this communicator's point-to-point space that was received
    /// or probed through the runtime (see [`p2p_pattern`](Self::p2p_pattern)).
    ///
    /// # Panics
    /// If the sender is not a member (the message did not come through this communicator).
    pub fn status_of_message(&self, info: spillway_runtime::MessageInfo) -> Status {
        Status {
            source: self.comm_rank_of(info.source),
            tag: info.tag,
            bytes: info.bytes,
        }
    }

    /// Blocks until a matching message is queued and describes it without receiving it
    /// (`MPI_Probe`).
    ///
    /// # Errors
    /// [`Error::Aborted`], [`Error::InvalidRank`].
    pub fn probe(&self, source: impl Into<Source>, tag: impl Into<Tag>) -> Result<Status> {
        let pattern = self.recv_pattern(source.into(), tag.into())?;
        let info = self.rank.probe(pattern, WaitKind::Probe)?;
        Ok(Status {
            source: self.comm_rank_of(info.source),
            tag: info.tag,
            bytes: info.bytes,
        })
    }

    /// Describes a matching queued message, if any (`MPI_Iprobe`).
    ///
    /// # Errors
    /// [`Error::InvalidRank`] or a negative tag.
    pub fn iprobe(&self, source: impl Into<Source>, tag: impl Into<Tag>) -> Result<Option<Status>> {
        let pattern = self.recv_pattern(source.into(), tag.into())?;
        Ok(self.rank.iprobe(&pattern).map(|info| Status {
            source: self.comm_rank_of(info.source),
            tag: info.tag,
            bytes: info.bytes,
        }))
    }
}
