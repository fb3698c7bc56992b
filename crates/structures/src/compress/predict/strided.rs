//! Strided views of a slice (points `first + j * step`), with every index checked once when
//! the view is made, for the predictors' and quantisers' inner loops.

/// Points `first + j * step` (`j < len`) of a slice, with every index checked once up front.
pub(crate) struct Strided<'a, T> {
    s: &'a [T],
    first: usize,
    step: usize,
    len: usize,
}

impl<'a, T: Copy> Strided<'a, T> {
    /// The points `first + j * step + o` for `j < len` and `o <= span` of `s`.
    ///
    /// # Panics
    /// If one of them lies outside `s`.
    #[inline]
    pub(crate) fn new(s: &'a [T], first: usize, step: usize, len: usize, span: usize) -> Self {
        if len > 0 {
            let last = (len - 1)
                .checked_mul(step)
                .and_then(|x| x.checked_add(first))
                .and_then(|x| x.checked_add(span));
            assert!(
                last.is_some_and(|l| l < s.len()),
                "strided access beyond the block"
            );
        }
        Strided {
            s,
            first,
            step,
            len,
        }
    }

    /// The value at `first + j * step + o`.
    ///
    /// # Safety
    /// `j < len` and `o <= span` of [`Strided::new`].
    #[inline(always)]
    pub(crate) unsafe fn at(&self, j: usize, o: usize) -> T {
        debug_assert!(j < self.len);
        // SAFETY: `new` checked `first + (len - 1) * step + span < s.len()` without overflow,
        // and the caller keeps `j < len`, `o <= span`.
        unsafe { *self.s.get_unchecked(self.first + j * self.step + o) }
    }
}

/// [`Strided`] for writing.
pub(crate) struct StridedMut<'a, T> {
    s: &'a mut [T],
    first: usize,
    step: usize,
    len: usize,
}

impl<'a, T> StridedMut<'a, T> {
    /// The points `first + j * step` for `j < len` of `s`.
    ///
    /// # Panics
    /// If one of them lies outside `s`.
    #[inline]
    pub(crate) fn new(s: &'a mut [T], first: usize, step: usize, len: usize) -> Self {
        if len > 0 {
            let last = (len - 1)
                .checked_mul(step)
                .and_then(|x| x.checked_add(first));
            assert!(
                last.is_some_and(|l| l < s.len()),
                "strided access beyond the block"
            );
        }
        StridedMut {
            s,
            first,
            step,
            len,
        }
    }

    /// The number of points.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Writes `v` at `first + j * step`.
    ///
    /// # Safety
    /// `j < len` of [`StridedMut::new`].
    #[inline(always)]
    pub(crate) unsafe fn set(&mut self, j: usize, v: T) {
        debug_assert!(j < self.len);
        // SAFETY: `new` checked `first + (len - 1) * step < s.len()` without overflow, and
        // the caller keeps `j < len`.
        unsafe { *self.s.get_unchecked_mut(self.first + j * self.step) = v };
    }
}
