//! Devices RLX can target. Only `Cpu` has a backend today; the others are named so that code
//! written against them compiles and reports `DeviceUnavailable` instead of failing to build.

use std::fmt;

/// A compute device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// The host CPU (`rlx-cpu`), the numerical oracle.
    Cpu,
    /// NVIDIA GPU via CUDA (planned).
    Cuda,
    /// Cross-platform GPU via wgpu (planned).
    Wgpu,
    /// Apple GPU via Metal (planned).
    Metal,
}

impl Device {
    /// Every device, fastest-first (the order [`fastest_device`] tries).
    pub const PRIORITY: [Device; 4] = [Device::Cuda, Device::Metal, Device::Wgpu, Device::Cpu];

    /// True when this build has a backend for the device and the device is present.
    pub fn is_available(self) -> bool {
        match self {
            Device::Cpu => cfg!(feature = "cpu"),
            Device::Cuda | Device::Wgpu | Device::Metal => false,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
            Device::Wgpu => "wgpu",
            Device::Metal => "metal",
        })
    }
}

/// The fastest device available here, in [`Device::PRIORITY`] order (falls back to `Cpu`).
pub fn fastest_device() -> Device {
    Device::PRIORITY.into_iter().find(|d| d.is_available()).unwrap_or(Device::Cpu)
}
