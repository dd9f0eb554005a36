//! The CUDA driver, loaded at run time (cudarc with dynamic loading): absent on most machines,
//! so nothing is called before `Driver::load` has found libcuda, and calls newer than the
//! installed driver are gated on its version (a missing symbol would abort).

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::time::Instant;

use cudarc::driver::sys;
use serde::Serialize;

use super::DeviceError;
use super::error::error_name;
use crate::cuda::{Cc, CudaVersion};
use crate::schema::documented;

pub struct Driver {
    /// `cuDriverGetVersion`: 12080 for CUDA 12.8.
    pub version: i32,
}

documented! {
    /// A GPU as the driver reports it (the `device` of rules in scope `device-module`).
    #[derive(Debug, Clone, Serialize, serde::Deserialize)]
    pub struct DeviceInfo {
        /// ordinal
        pub index: u32,
        /// `NVIDIA H100 80GB HBM3`
        pub name: String,
        /// compute capability
        pub cc: String,
        /// the driver's CUDA version
        pub driver_cuda: String,
    }
}

fn code(r: sys::CUresult) -> u32 {
    r as u32
}

fn check(r: sys::CUresult, what: &'static str) -> Result<(), DeviceError> {
    match code(r) {
        0 => Ok(()),
        code => Err(DeviceError::Call { what, code }),
    }
}

/// What loading one image (a whole container, or one entry) did.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Load {
    /// 0 on success, else the CUDA error.
    pub result: u32,
    pub error: String,
    /// Wall time of the load (JIT included; for a single image, finalising its functions too).
    pub ms: f64,
    /// The JIT's own wall time (`CU_JIT_WALL_TIME`), where the driver reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jit_ms: Option<f64>,
    #[serde(default)]
    pub log: String,
}

impl Load {
    /// A load that did not reach the driver's answer (not extracted, the worker crashed).
    pub fn refused(result: u32, error: String) -> Load {
        Load { result, error, ms: 0.0, jit_ms: None, log: String::new() }
    }
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Function {
    pub name: String,
    /// Attributes as the driver reports them; null where it refused (see `attribute_error`).
    pub registers: Option<i32>,
    pub shared_bytes: Option<i32>,
    pub local_bytes: Option<i32>,
    pub max_threads_per_block: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub attribute_error: String,
}

pub struct Module(sys::CUmodule);

impl Driver {
    /// Finds and initialises libcuda, or says plainly why not.
    pub fn load() -> Result<Driver, DeviceError> {
        // SAFETY: only probes whether the library can be opened.
        if !unsafe { sys::is_culib_present() } {
            return Err(DeviceError::NoDriver);
        }
        // SAFETY: libcuda is present; cuInit and cuDriverGetVersion exist in every driver.
        unsafe {
            match code(sys::cuInit(0)) {
                0 => {}
                code => return Err(DeviceError::Init { code }),
            }
            let mut v: c_int = 0;
            check(sys::cuDriverGetVersion(&mut v), "cuDriverGetVersion")?;
            Ok(Driver { version: v })
        }
    }

    pub fn cuda_version(&self) -> CudaVersion {
        CudaVersion::new((self.version / 1000) as u16, ((self.version % 1000) / 10) as u16)
    }

    pub fn devices(&self) -> Result<Vec<(DeviceInfo, Cc)>, DeviceError> {
        let mut out = Vec::new();
        // SAFETY: driver initialised; out-parameters are valid locals.
        unsafe {
            let mut n: c_int = 0;
            check(sys::cuDeviceGetCount(&mut n), "cuDeviceGetCount")?;
            for i in 0..n {
                let mut dev: sys::CUdevice = 0;
                check(sys::cuDeviceGet(&mut dev, i), "cuDeviceGet")?;
                let mut name = [0 as c_char; 256];
                check(sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as c_int, dev), "cuDeviceGetName")?;
                let (mut ma, mut mi) = (0, 0);
                check(
                    sys::cuDeviceGetAttribute(
                        &mut ma,
                        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                        dev,
                    ),
                    "compute capability",
                )?;
                check(
                    sys::cuDeviceGetAttribute(
                        &mut mi,
                        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                        dev,
                    ),
                    "compute capability",
                )?;
                let cc = Cc { major: ma as u8, minor: mi as u8 };
                let info = DeviceInfo {
                    index: i as u32,
                    name: CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned(),
                    cc: cc.to_string(),
                    driver_cuda: self.cuda_version().to_string(),
                };
                out.push((info, cc));
            }
        }
        Ok(out)
    }

    /// Makes the device's primary context current on this thread.
    pub fn use_device(&self, index: u32) -> Result<(), DeviceError> {
        // SAFETY: valid ordinal checked by the driver; out-parameters are locals.
        unsafe {
            let mut dev: sys::CUdevice = 0;
            check(sys::cuDeviceGet(&mut dev, index as c_int), "cuDeviceGet")?;
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            check(sys::cuDevicePrimaryCtxRetain(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
            check(sys::cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        }
    }

    /// `cuModuleLoadDataEx` with JIT logs and wall time. `image` is a fatbin, a cubin, or
    /// NUL-terminated PTX.
    pub fn load_module(&self, image: &[u8]) -> (Load, Option<Module>) {
        const LOG: usize = 16 << 10;
        let mut info = vec![0u8; LOG];
        let mut error = vec![0u8; LOG];
        let mut opts = [
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_WALL_TIME,
        ];
        let mut vals: [*mut c_void; 5] = [
            info.as_mut_ptr().cast(),
            LOG as *mut c_void,
            error.as_mut_ptr().cast(),
            LOG as *mut c_void,
            // The driver writes the float into this slot itself.
            std::ptr::null_mut(),
        ];
        let mut m: sys::CUmodule = std::ptr::null_mut();
        let t0 = Instant::now();
        // SAFETY: `image` outlives the call; option arrays match in length and types as the
        // driver API documents them (sizes passed by value in the pointer slot).
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut m,
                image.as_ptr().cast(),
                opts.len() as c_uint,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        let text = |b: &[u8]| {
            String::from_utf8_lossy(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]).trim().to_string()
        };
        let log = [text(&error), text(&info)].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n");
        let c = code(r);
        // The slot's low 32 bits hold the f32 the driver wrote (x86-64 and aarch64: little-endian).
        let wall = f32::from_bits(vals[4] as usize as u32);
        let jit_ms = (c == 0 && wall > 0.0 && wall.is_finite()).then_some(f64::from(wall));
        let load = Load { result: c, error: error_name(c), ms, jit_ms, log };
        (load, (c == 0).then_some(Module(m)))
    }

    pub fn unload(&self, m: Module) {
        // SAFETY: a module this driver loaded, unloaded once (consumed).
        unsafe {
            sys::cuModuleUnload(m.0);
        }
    }

    /// The module's functions with their attributes (asking for them also finalises a lazily
    /// loaded module). Enumerated where the driver can (12.4+), else looked up by `names`.
    pub fn functions(&self, m: &Module, names: &[String]) -> Vec<Function> {
        let mut handles: Vec<(String, sys::CUfunction)> = Vec::new();
        // SAFETY: `m` is loaded; buffers sized from the count the driver reports; the 12.3+/12.4+
        // entry points are only called on drivers that have them.
        unsafe {
            if self.version >= 12040 {
                let mut n: c_uint = 0;
                if code(sys::cuModuleGetFunctionCount(&mut n, m.0)) == 0 {
                    let mut fs = vec![std::ptr::null_mut(); n as usize];
                    if code(sys::cuModuleEnumerateFunctions(fs.as_mut_ptr(), n, m.0)) == 0 {
                        for f in fs {
                            let mut p: *const c_char = std::ptr::null();
                            let name = if code(sys::cuFuncGetName(&mut p, f)) == 0 && !p.is_null() {
                                CStr::from_ptr(p).to_string_lossy().into_owned()
                            } else {
                                String::from("?")
                            };
                            handles.push((name, f));
                        }
                    }
                }
            }
            if handles.is_empty() {
                for n in names {
                    let Ok(c) = CString::new(n.as_str()) else { continue };
                    let mut f: sys::CUfunction = std::ptr::null_mut();
                    if code(sys::cuModuleGetFunction(&mut f, m.0, c.as_ptr())) == 0 {
                        handles.push((n.clone(), f));
                    }
                }
            }
            let mut out: Vec<Function> = handles
                .into_iter()
                .map(|(name, f)| {
                    let mut refused = Vec::new();
                    // Under lazy loading some attributes (max threads per block) answer 913,
                    // CUDA_ERROR_FUNCTION_NOT_LOADED, until the function is loaded (seen on
                    // driver 580): load it, which is also what finalises it.
                    if self.version >= 12040 {
                        let c = code(sys::cuFuncLoad(f));
                        if c != 0 {
                            refused.push(format!("load: {} ({c})", error_name(c)));
                        }
                    }
                    let mut attr = |a: sys::CUfunction_attribute, what: &str| {
                        let mut v: c_int = -1;
                        match code(sys::cuFuncGetAttribute(&mut v, a, f)) {
                            0 => Some(v),
                            c => {
                                refused.push(format!("{what}: {} ({c})", error_name(c)));
                                None
                            }
                        }
                    };
                    use sys::CUfunction_attribute as A;
                    let registers = attr(A::CU_FUNC_ATTRIBUTE_NUM_REGS, "registers");
                    let shared_bytes = attr(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "shared memory");
                    let local_bytes = attr(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local memory");
                    let max_threads_per_block =
                        attr(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block");
                    Function {
                        name,
                        registers,
                        shared_bytes,
                        local_bytes,
                        max_threads_per_block,
                        attribute_error: refused.join("; "),
                    }
                })
                .collect();
            out.sort_by(|a, b| a.name.cmp(&b.name));
            out
        }
    }

    /// Launches `name` once on a 1x1x1 grid with zero-filled parameters sized by
    /// `cuFuncGetParamInfo` (12.4+). Returns the launch and synchronise result.
    pub fn launch_zeroed(&self, m: &Module, name: &str) -> Result<u32, DeviceError> {
        if self.version < 12040 {
            return Err(DeviceError::NoParamInfo);
        }
        let c = CString::new(name).map_err(|_| DeviceError::NulInName)?;
        // SAFETY: the function comes from the loaded module; every parameter buffer is as large
        // as the driver says and lives until the launch has been synchronised.
        unsafe {
            let mut f: sys::CUfunction = std::ptr::null_mut();
            check(sys::cuModuleGetFunction(&mut f, m.0, c.as_ptr()), "cuModuleGetFunction")?;
            let mut params: Vec<Vec<u8>> = Vec::new();
            for i in 0..4096usize {
                let (mut off, mut size) = (0usize, 0usize);
                if code(sys::cuFuncGetParamInfo(f, i, &mut off, &mut size)) != 0 {
                    break;
                }
                params.push(vec![0u8; size.max(1)]);
            }
            let mut ptrs: Vec<*mut c_void> = params.iter_mut().map(|p| p.as_mut_ptr().cast()).collect();
            let r = sys::cuLaunchKernel(
                f,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                std::ptr::null_mut(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            );
            if code(r) != 0 {
                return Ok(code(r));
            }
            Ok(code(sys::cuCtxSynchronize()))
        }
    }

    /// The canary: this project's own PTX, JIT-compiled for the device, run, its result checked
    /// on the host. Proves the device and driver really execute code.
    pub fn canary(&self) -> Result<String, DeviceError> {
        // Every thread of one block writes 1000 + its index.
        const PTX: &str = ".version 6.0\n.target sm_50\n.address_size 64\n\
            .visible .entry cudalint_canary(.param .u64 out)\n{\n\
            .reg .b32 %r<3>;\n.reg .b64 %rd<5>;\n\
            ld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd2, %rd1;\n\
            mov.u32 %r1, %tid.x;\nadd.s32 %r2, %r1, 1000;\n\
            mul.wide.u32 %rd3, %r1, 4;\nadd.s64 %rd4, %rd2, %rd3;\n\
            st.global.u32 [%rd4], %r2;\nret;\n}\n\0";
        const N: usize = 64;
        let (load, m) = self.load_module(PTX.as_bytes());
        let m = m.ok_or_else(|| DeviceError::CanaryDoesNotLoad { error: load.error.clone(), log: load.log.clone() })?;
        // SAFETY: a device buffer of N u32 is allocated, written by the kernel, copied back and freed.
        let r = unsafe {
            let mut f: sys::CUfunction = std::ptr::null_mut();
            let name = CString::new("cudalint_canary").expect("no NUL");
            check(sys::cuModuleGetFunction(&mut f, m.0, name.as_ptr()), "cuModuleGetFunction")?;
            let mut buf: sys::CUdeviceptr = 0;
            check(sys::cuMemAlloc_v2(&mut buf, N * 4), "cuMemAlloc")?;
            let mut arg = buf;
            let mut ptrs: [*mut c_void; 1] = [(&mut arg as *mut sys::CUdeviceptr).cast()];
            let launched = check(
                sys::cuLaunchKernel(
                    f,
                    1,
                    1,
                    1,
                    N as c_uint,
                    1,
                    1,
                    0,
                    std::ptr::null_mut(),
                    ptrs.as_mut_ptr(),
                    std::ptr::null_mut(),
                ),
                "cuLaunchKernel",
            )
            .and_then(|()| check(sys::cuCtxSynchronize(), "cuCtxSynchronize"));
            let mut host = vec![0u32; N];
            let copied = launched
                .and_then(|()| check(sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), buf, N * 4), "cuMemcpyDtoH"));
            sys::cuMemFree_v2(buf);
            copied.map(|()| host)
        };
        self.unload(m);
        let host = r?;
        let bad = host.iter().enumerate().find(|(i, v)| **v != 1000 + *i as u32);
        match bad {
            None => Ok(format!("{N} threads ran and wrote the expected values (JIT {:.1} ms)", load.ms)),
            Some((thread, &wrote)) => Err(DeviceError::CanaryWrongValue { thread, wrote, expected: 1000 + thread }),
        }
    }
}
