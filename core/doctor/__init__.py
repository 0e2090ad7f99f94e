"""The GPU check (`specexec doctor`): what no test on our GPU-less machines can show, checked on the user's
machine the first time the app meets an NVIDIA GPU, with a plain sentence for the person and a JSON report
for us. Format and fixtures: docs/doctor.md.

    run_doctor(device="auto", progress=None) -> DoctorReport        core.doctor.run
    save_report(report, folder) / load_report(path)                 core.doctor.report
    redecide(report) -> DoctorReport (today's rules, stored data)   core.doctor.decisions

One module per check, each a `measure(...)` (needs torch, mostly a GPU) and a pure `decide(measurement)`:
compat (driver and card vs the torch build, without starting CUDA), kernel (fused GPTQ kernel vs eager),
link (pinned copy rate vs the PCIe link), offload (tiny GPTQ model streamed vs the CPU), graphs (captured vs
eager draft forward), streaming (70B-shaped layer vs its copy floor, draft forward vs its memory floor).
"""
