//! Algorithms written on the BSP primitives of `spillway-bsp` (put, get, sync).
//!
//! [`fft`]: the BSP FFT of Inda and Bisseling, one superstep of communication, rustfft for
//! the local transforms. [`sort`]: sample sort by regular sampling (PSRS).

pub mod fft;
pub mod sort;
