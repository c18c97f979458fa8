"""NVML through ctypes for validation/cuda_run.py: the driver version and what NVML reports as used
by one process and by the device (what nvidia-smi shows). The same few calls as headroom's
src/measure/nvml.cc, after NVIDIA's NVML API Reference (https://docs.nvidia.com/deploy/nvml-api/):
nvmlInit_v2, nvmlSystemGetDriverVersion, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetMemoryInfo,
nvmlDeviceGetComputeRunningProcesses_v3 (falling back to _v2, then the unversioned v1 call).

Without NVML every method returns None: the harness still measures what PyTorch reports.
"""
import ctypes
import os


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _ProcessV2(ctypes.Structure):  # nvmlProcessInfo_t of _v3 and nvmlProcessInfo_v2_t: 24 bytes
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _ProcessV1(ctypes.Structure):  # nvmlProcessInfo_v1_t: 16 bytes
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


NOT_AVAILABLE = (1 << 64) - 1


class Nvml:
    def __init__(self, index=0):
        self.ok = False
        path = os.environ.get("HEADROOM_NVML_LIBRARY") or "libnvidia-ml.so.1"
        try:
            self.lib = ctypes.CDLL(path)
        except OSError:
            return
        if self.lib.nvmlInit_v2() != 0:
            return
        self.dev = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self.dev)) != 0:
            return
        for name, struct in (("nvmlDeviceGetComputeRunningProcesses_v3", _ProcessV2),
                             ("nvmlDeviceGetComputeRunningProcesses_v2", _ProcessV2),
                             ("nvmlDeviceGetComputeRunningProcesses", _ProcessV1)):
            if hasattr(self.lib, name):
                self._processes, self._struct = getattr(self.lib, name), struct
                break
        self.ok = True

    def driver_version(self):
        if not self.ok:
            return None
        buf = ctypes.create_string_buffer(80)
        return buf.value.decode() if self.lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(80)) == 0 else None

    def device_used(self):
        if not self.ok:
            return None
        m = _Memory()
        return m.used if self.lib.nvmlDeviceGetMemoryInfo(self.dev, ctypes.byref(m)) == 0 else None

    def process_used(self, pid=None):
        """NVML's used memory of `pid` (default: this process) on the device; None when unknown
        (no NVML, no number, or the pid is not listed)."""
        if not self.ok:
            return None
        pid = os.getpid() if pid is None else pid
        n = 64
        for _ in range(4):
            arr = (self._struct * n)()
            count = ctypes.c_uint(n)
            r = self._processes(self.dev, ctypes.byref(count), arr)
            if r == 7:  # NVML_ERROR_INSUFFICIENT_SIZE
                n = count.value * 2 + 8
                continue
            if r != 0:
                return None
            for i in range(count.value):
                if arr[i].pid == pid:
                    return None if arr[i].usedGpuMemory == NOT_AVAILABLE else arr[i].usedGpuMemory
            # Not listed: in a container NVML lists host pids, which this process cannot match.
            return None
        return None
