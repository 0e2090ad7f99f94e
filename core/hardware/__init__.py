"""What this computer has, for choosing and sizing a model: CPU, RAM, NVIDIA GPUs (through NVML) with their
PCIe links, free disk at the models folder. No torch at import: the app's process imports this package.

    probe_hardware(measure=False) -> HardwareDescription     (core.hardware.probe)
    HardwareDescription.to_dict() / from_dict(...)          the `specexec hw --json` contract
    describe_hardware(fixture=None)                          a fixture file (--hw, SPECEXEC_HW_FIXTURE) or a probe
"""
