"""The acceptance dossier's words, in English and Chinese, from one catalogue (no translation at run time).

Every sentence the dossier prints is a key of :data:`MESSAGES` with its English and Chinese text, written
for an acceptance review (the Chinese as platform, algorithm and business teams write their acceptance
documents: 可证明 / 不能证明, 附条件接受 …). Placeholders are ``str.format`` fields and are the same in
both languages (``tests/test_dossier.py`` holds that). Values from evidence (names, digests, messages
a tool printed) are inserted as they are, never translated.
"""

from __future__ import annotations

from typing import Any, Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")

MESSAGES: dict[str, tuple[str, str]] = {
    # document
    "title": ("Acceptance dossier", "验收报告"),
    "subtitle": ("Evidence bundle {run}, written by pytest-hetero {version}",
                 "证据包 {run}，由 pytest-hetero {version} 生成"),
    "toc": ("Contents", "目录"),
    "footer": ("Generated from evidence.json by pytest-hetero {version}. Integrity: manifest.json and "
               "attestation.intoto.jsonl; check them offline with hetero verify.",
               "本报告由 pytest-hetero {version} 依据 evidence.json 生成。完整性由 manifest.json 与 "
               "attestation.intoto.jsonl 保证，可离线使用 hetero verify 校验。"),
    "list.sep": (", ", "、"),
    "kv": ("{label}: {value}", "{label}：{value}"),
    "count.status": ("{count} {status}", "{status} {count} 项"),
    # section headings
    "h.scope": ("Scope", "验收范围"),
    "h.verdict": ("Verdict", "验收结论"),
    "h.change": ("Change since the accepted baseline", "与已验收基线相比的变化"),
    "h.conditions": ("Open conditions", "未关闭事项"),
    "h.proves": ("What this run proves", "本次运行可证明"),
    "h.not_proves": ("What this run does not prove", "本次运行不能证明"),
    "h.layers": ("The five layers", "五层验证"),
    "h.results": ("Acceptance results", "业务验收结果"),
    "h.operations": ("Run-time operations evidence", "运行期运维证据"),
    "h.phases": ("Acceptance phases", "验收阶段"),
    "h.scenarios": ("POC scenarios", "POC 场景"),
    "h.untested": ("Untested scope", "未测试范围"),
    "h.reproduce": ("Reproduce", "复现方法"),
    "h.heatmap": ("Matrix heat map (resource × image)", "矩阵热力图（资源 × 镜像）"),
    # scope
    "scope.run": ("Run", "运行"),
    "scope.time": ("{start} → {end} (UTC)", "{start} → {end}（UTC）"),
    "scope.targets": ("Clusters and hosts", "集群与主机"),
    "scope.target": ("{backend} at {identity}: nodes {nodes}", "{backend}，{identity}：节点 {nodes}"),
    "scope.pools": ("Resource pools", "资源池"),
    "scope.pool": ("{resource}: requests {requests}{selector}", "{resource}：资源请求 {requests}{selector}"),
    "scope.selector": ("; node selector {selector}", "；节点选择器 {selector}"),
    "scope.queue": ("; queue {queue}", "；队列 {queue}"),
    "scope.backends": ("Backends", "执行后端"),
    "scope.profile": ("Profile", "验证档位"),
    "scope.no_profile": ("none (every layer of every combination)", "未指定（全部组合、全部层级）"),
    "scope.matrix": ("Matrix", "验证矩阵"),
    "scope.items": ("Items", "验证项"),
    "scope.counts": ("{total} items: {counts}", "共 {total} 项：{counts}"),
    # verdict
    "verdict.pass": ("passed", "通过"),
    "verdict.fail": ("failed", "未通过"),
    "verdict.incomplete": ("incomplete", "未完成"),
    "verdict.not_clean": ("not clean (the run left objects it created)", "未清理干净（运行遗留了其创建的对象）"),
    "verdict.sep": (" — ", "——"),
    "verdict.join": ("; ", "；"),
    "q.not_applicable": ("{layer} not proven on this backend ({backends})",
                         "{layer}未在此后端（{backends}）上得到证明"),
    "q.blocked": ("{layer} not proven: blocked by failures below it", "{layer}未得到证明：被下层失败阻断"),
    "q.deselected": ("{layer} not run (deselected)", "{layer}未运行（未被选中）"),
    "q.none": ("{layer} not proven ({statuses})", "{layer}未得到证明（{statuses}）"),
    "q.partial": ("{layer} proven for {passed} of {total} resources",
                  "{layer}仅在 {total} 个资源中的 {passed} 个上得到证明"),
    "q.failed": ("{failed} item(s) failed, {errors} errored", "{failed} 项失败，{errors} 项执行异常"),
    "q.simulated": ("startup and model ran on simulated nodes ({nodes})", "启动与模型运行在模拟节点（{nodes}）上进行"),
    "q.part": ("{layer}: {part} not proven", "{layer}：{part}未得到证明"),
    "q.unsigned": ("bundle unsigned", "证据包未签名"),
    "q.unverified": ("bundle signature not verified", "证据包签名未验证"),
    "verdict.unverified": ("NOT VERIFIED — the unproven evidence says: {verdict}",
                           "未经验证——未经证实的证据称：{verdict}"),
    "cover.verified": ("Verified: the run's signature checks with trusted key {keyid}.",
                       "已验证：运行签名经受信任的密钥 {keyid} 验证通过。"),
    "cover.unverified": ("NOT verified: the bundle carries a signature by key {keyid}, not checked with a trusted key "
                         "({why}). Nothing on these pages is proven until `hetero verify` or `hetero render --key` "
                         "succeeds.",
                         "未验证：证据包带有密钥 {keyid} 的签名，但未经受信任的密钥验证（{why}）。"
                         "在 `hetero verify` 或 `hetero render --key` 成功之前，本文件所述均未得到证明。"),
    "cover.unsigned": ("NOT verified: the bundle is UNSIGNED ({why}). Nothing on these pages is proven.",
                       "未验证：证据包未签名（{why}）。本文件所述均未得到证明。"),
    "cover.no_key": ("no trusted key given", "未提供受信任的密钥"),
    "q.interrupted": ("run interrupted", "运行被中断"),
    # change since baseline
    "change.none": ("No baseline was given for this run: nothing is compared with an accepted run.",
                    "本次运行未指定基线，未与已验收的运行进行比较。"),
    "change.error": ("The baseline could not be compared: {error}", "无法与基线比较：{error}"),
    "change.baseline": ("Baseline run {run} ({verification}).", "基线运行 {run}（{verification}）。"),
    "change.verified": ("signature verified", "签名已验证"),
    "change.unsigned": ("unsigned, accepted as such", "未签名，按未签名接受"),
    "change.unverified": ("signed, not verified: no trusted key", "已签名但未验证：无可信公钥"),
    "change.version": ("{what} {name}: {old} → {new}", "{what} {name}：{old} → {new}"),
    "change.what.model": ("model", "模型"),
    "change.what.dataset": ("dataset", "数据集"),
    "change.what.image": ("image", "镜像"),
    "change.what.matrix": ("matrix", "矩阵"),
    "change.transitions": ("Status changes: {counts}", "状态变化：{counts}"),
    "change.item": ("{transition}: {item} ({old} → {new})", "{transition}：{item}（{old} → {new}）"),
    "change.metric": ("metric {rule} of {item}: {old} → {new} ({relative})",
                      "{item} 的指标 {rule}：{old} → {new}（{relative}）"),
    "change.target": ("{backend} {field}: {old} → {new}", "{backend} {field}：{old} → {new}"),
    "change.gate": ("Baseline gate (fail-on {policy}): {result}", "基线门禁（失败策略 {policy}）：{result}"),
    "change.nothing": ("No change of status, version, metric or target.", "状态、版本、指标及目标环境均无变化。"),
    "t.regression": ("regression", "回归"),
    "t.new_failure": ("new failure", "新增失败"),
    "t.still_failing": ("still failing", "持续失败"),
    "t.fixed": ("fixed", "已修复"),
    "t.newly_untested": ("newly untested", "新增未测试"),
    "t.newly_covered": ("newly covered", "新增覆盖"),
    # open conditions
    "cond.none": ("No open condition.", "无未关闭事项。"),
    "cond.pending": ("Sign-off pending: {role} ({layers})", "待签核：{role}（{layers}）"),
    "cond.condition": ("{role} accepted on condition: {text}", "{role}附条件接受：{text}"),
    "cond.known_failures": ("{role} accepted with known failures", "{role}在已知失败存在的情况下接受"),
    "cond.rejected": ("{role} rejected", "{role}拒绝接受"),
    "cond.unverified": ("A sign-off for {role} does not verify: {why}", "{role}的签核未通过验证：{why}"),
    "cond.failures": ("{count} failed or errored item(s) owned by {team}", "{team}负责的 {count} 个失败或异常项"),
    # proves
    "proves.discovery": ("{resource}: devices and advertised resources seen healthy on {where} at {at}",
                         "{resource}：{at} 在 {where} 上观察到设备及其声明的资源健康可见"),
    "proves.scheduling": ("{resource}: a workload asking for {requests} was placed on node {node} after {waited} s",
                          "{resource}：按 {requests} 请求资源的工作负载在 {waited} 秒后被调度到节点 {node}"),
    "proves.scheduling_engine": ("{resource}: the {backend} engine accepted the request {requests}",
                                 "{resource}：{backend} 引擎接受了资源请求 {requests}"),
    "proves.startup": ("{resource} × {image}: the image (digest {digest}) started and its device framework "
                       "initialised ({init})",
                       "{resource} × {image}：镜像（摘要 {digest}）已启动，设备框架初始化成功（{init}）"),
    "proves.startup_only": ("{resource} × {image}: the image (digest {digest}) started (no model declares a "
                            "device framework, so none was initialised)",
                            "{resource} × {image}：镜像（摘要 {digest}）已启动"
                            "（没有模型声明设备框架，因此未初始化任何框架）"),
    "proves.model": ("{model} {version} ran on {dataset} {dataset_version} on {resource} × {image} in {duration} s "
                     "(exit 0, outputs kept)",
                     "模型 {model} {version} 在 {resource} × {image} 上以数据集 {dataset} {dataset_version} 运行完成，"
                     "用时 {duration} 秒（退出码 0，输出已留存）"),
    "proves.communication": ("{resource} × {image}: an all-reduce across {world} ranks ({backend}) returned the right "
                             "sum; bus bandwidth {busbw} GB/s at {bytes} B",
                             "{resource} × {image}：{world} 个进程的 all-reduce（{backend}）结果正确；"
                             "{bytes} 字节时总线带宽 {busbw} GB/s"),
    "proves.checkpoint": ("{resource} × {image}: the job wrote its checkpoint to {volume}, was killed, restarted and "
                          "resumed at step {step} with the digest it wrote",
                          "{resource} × {image}：作业将检查点写入 {volume}，被终止后重启，"
                          "从第 {step} 步恢复且摘要一致"),
    "proves.business": ("{model}@{dataset} on {resource} × {image}: all {rules} acceptance rules met",
                        "{model}@{dataset} 在 {resource} × {image} 上：{rules} 条业务验收规则全部满足"),
    "proves.none": ("Nothing in this layer passed: none of its claims is proven.",
                    "本层无通过项，其结论均未得到证明。"),
    "proves.more": ("… and {count} more", "……另有 {count} 项"),
    "where.nodes": ("node(s) {nodes}", "节点 {nodes}"),
    # does not prove
    "dnp.discovery": ("Discovery: that a workload can be scheduled onto these devices, or that they work under load.",
                      "资源发现：不能证明工作负载可被调度到这些设备上，也不能证明设备在负载下正常工作。"),
    "dnp.scheduling.none": ("Scheduling: the {backends} backend places nothing: no scheduler, queue, quota or "
                            "Pending reason was exercised for any resource.",
                            "调度：{backends} 后端不进行任何调度，任何资源的调度器、队列、配额及 Pending 原因"
                            "均未被检验。"),
    "dnp.scheduling": ("Scheduling: capacity for more than one workload, fairness between tenants, or behaviour "
                       "after quota or node changes.",
                       "调度：不能证明可同时容纳多个工作负载、租户之间的公平性，以及配额或节点变化之后的行为。"),
    "dnp.startup.local": ("Startup on the local backend: no container was started; image pull, container runtime, "
                          "mounts and driver injection were not exercised (the 'image' is a Python environment "
                          "on this host).",
                          "启动（local 后端）：未启动任何容器，镜像拉取、容器运行时、挂载及驱动注入均未被检验"
                          "（此处的“镜像”是本机的 Python 环境）。"),
    "dnp.startup": ("Startup: that any particular model runs correctly.", "启动：不能证明任何具体模型能够正确运行。"),
    "dnp.simulated": ("Startup and model on {nodes}: these nodes are simulated (KWOK); container state comes from "
                      "KWOK, no image was pulled, and commands ran on the KWOK host, not inside the image.",
                      "启动与模型运行（{nodes}）：这些节点为模拟节点（KWOK），容器状态由 KWOK 给出，未拉取镜像，"
                      "命令在 KWOK 主机上而非镜像内执行。"),
    "dnp.model": ("Model: other model or data-set versions, other inputs, batch sizes, or longer runs than these.",
                  "模型运行：不能覆盖其他模型或数据集版本、其他输入、批大小，以及比本次更长时间的运行。"),
    "dnp.business": ("Business: that the acceptance rules are sufficient, or how the model behaves on other data.",
                     "业务验收：不能证明验收规则本身是充分的，也不能证明模型在其他数据上的表现。"),
    "dnp.layer": ("{layer}: nothing passed in this layer ({statuses}); none of its claims is proven.",
                  "{layer}：本层无通过项（{statuses}），其结论均未得到证明。"),
    "dnp.part": ("{layer}: {part} was not proven on {count} item(s): {reason}",
                 "{layer}：{count} 个验证项的 {part} 未得到证明：{reason}"),
    "dnp.usage": ("Run-time usage: {count} model run(s) carry no device samples ({why}).",
                  "运行期用量：{count} 次模型运行没有设备采样数据（{why}）。"),
    "dnp.cgroup": ("Run-time usage on CPU is the cgroup's, the harness included, not the model process's alone.",
                   "CPU 上的运行期用量为整个 cgroup 的数值（包含测试框架自身），并非仅为模型进程。"),
    # layer chapters
    "layer.discovery": ("Discovery", "资源发现"),
    "layer.scheduling": ("Scheduling", "调度"),
    "layer.startup": ("Startup", "启动"),
    "layer.model": ("Model execution", "模型运行"),
    "layer.business": ("Business acceptance", "业务验收"),
    "claim.discovery": ("Nodes and devices are visible, healthy, labelled and expose the resource the platform claims.",
                        "节点与设备可见、健康、标签正确，并对外提供平台所声明的资源。"),
    "claim.scheduling": ("A workload asking for the resource through the real path lands in the right pool, or "
                         "its Pending reason is explained.",
                         "通过真实路径申请该资源的工作负载被调度到正确的资源池，或其 Pending 原因得到解释。"),
    "claim.startup": ("The image starts there: mounts, runtime, driver and device initialise inside the container.",
                      "镜像能在该处启动：挂载、运行时、驱动及设备均在容器内完成初始化。"),
    "claim.model": ("The named model version runs on the named data-set version.",
                    "指定版本的模型能在指定版本的数据集上运行。"),
    "claim.business": ("Its outputs meet the business acceptance rules.", "其输出满足业务验收规则。"),
    "chapter.claim": ("Claim", "结论"),
    "chapter.owner": ("Owner team", "责任团队"),
    "chapter.counts": ("Results", "结果"),
    "chapter.evidence": ("Evidence kinds", "证据类型"),
    "chapter.items": ("Items", "验证项"),
    "chapter.signoff": ("Sign-off", "签核"),
    "ev.device_state": ("device state with time", "带时间戳的设备状态"),
    "ev.engine_facts": ("engine facts (version, runtimes)", "容器引擎信息（版本、运行时）"),
    "ev.requests_allocated": ("requests vs allocated", "资源请求与实际分配"),
    "ev.queue_quota": ("queue/quota decisions", "队列/配额决策"),
    "ev.pending": ("Pending reasons", "Pending 原因"),
    "ev.image_digest": ("image digest", "镜像摘要"),
    "ev.input_digests": ("model/dataset digests", "模型/数据集摘要"),
    "ev.device_init": ("device init", "设备初始化"),
    "ev.logs": ("logs", "日志"),
    "ev.outputs": ("outputs", "输出结果"),
    "ev.failure_reasons": ("failure reasons", "失败原因"),
    "ev.usage": ("run-time usage samples", "运行期用量采样"),
    "ev.samples": ("business samples with verdicts", "业务样本及判定"),
    "ev.present": ("{count} item(s)", "{count} 项"),
    "ev.absent": ("not recorded in this run", "本次运行未记录"),
    "col.item": ("Item", "验证项"),
    "col.status": ("Status", "状态"),
    "col.evidence": ("Evidence", "证据"),
    "col.reason": ("Reason", "原因"),
    "col.owner": ("Owner", "责任方"),
    "items.more": ("{count} more item(s) of this layer, mostly passed, are in evidence.json.",
                   "本层另有 {count} 项（多为通过项）见 evidence.json。"),
    "fact.snapshot": ("{devices} device(s) at {at}", "{at} 时 {devices} 个设备"),
    "fact.placed": ("node {node}, {waited} s", "节点 {node}，{waited} 秒"),
    "fact.digest": ("digest {digest}", "摘要 {digest}"),
    "fact.run": ("exit {exit_code}, {duration} s, peak RSS {rss} MiB",
                 "退出码 {exit_code}，{duration} 秒，峰值 RSS {rss} MiB"),
    "fact.rules": ("{passed} of {total} rules met", "{total} 条规则中满足 {passed} 条"),
    # sign-off
    "so.role": ("Role", "角色"),
    "so.layers": ("Layers", "层级"),
    "so.state": ("State", "状态"),
    "so.signer": ("Signed by", "签核人"),
    "so.decision": ("Decision", "决定"),
    "so.conditions": ("Conditions", "条件"),
    "so.at": ("Signed at", "签核时间"),
    "so.verified": ("Signature", "签名"),
    "so.verified_yes": ("verified", "已验证"),
    "so.verified_no": ("not verified: {why}", "未验证：{why}"),
    "so.not_checked": ("this rendering did not verify it (run hetero verify)",
                       "本次生成未验证（请运行 hetero verify）"),
    "so.none": ("No sign-off yet.", "尚无签核。"),
    "so.run_signer": ("Bundle signed by key {keyid}, verified with that trusted key.",
                      "证据包由密钥 {keyid} 签名，并经该受信任密钥验证。"),
    "so.run_signer_unverified": ("Bundle carries a signature by key {keyid}, NOT verified: {why}.",
                                 "证据包带有密钥 {keyid} 的签名，未验证：{why}。"),
    "so.unsigned": ("Bundle UNSIGNED: {why}.", "证据包未签名：{why}。"),
    "so.unsigned_plain": ("Bundle UNSIGNED: no run signature.", "证据包未签名：没有运行签名。"),
    "state.pending": ("pending", "待签核"),
    "state.signed": ("signed (decision not recorded)", "已签名（未记录决定）"),
    "state.accepted": ("accepted", "接受"),
    "state.accepted_with_conditions": ("accepted with conditions", "附条件接受"),
    "state.accepted_with_known_failures": ("accepted with known failures", "带已知失败接受"),
    "state.rejected": ("rejected", "拒绝"),
    # acceptance results
    "res.heading": ("{model} {version} × {dataset} {dataset_version}",
                    "{model} {version} × {dataset} {dataset_version}"),
    "res.digests": ("model sha256 {model_sha}; dataset sha256 {dataset_sha}",
                    "模型 sha256 {model_sha}；数据集 sha256 {dataset_sha}"),
    "res.where": ("Resource × image", "资源 × 镜像"),
    "res.rule": ("Rule", "规则"),
    "res.threshold": ("Threshold", "阈值"),
    "res.observed": ("Observed", "实测值"),
    "res.verdict": ("Verdict", "判定"),
    "res.failing": ("Failing golden samples", "未通过的金标样本"),
    "res.pass": ("pass", "通过"),
    "res.fail": ("fail", "未通过"),
    "res.not_run": ("business layer {status}: {reason}", "业务验收{status}：{reason}"),
    "res.none": ("No acceptance rule was evaluated in this run.", "本次运行未评估任何业务验收规则。"),
    "res.sample": ("sample {run}", "第 {run} 次采样"),
    "res.more": ("{count} more business item(s) are in evidence.json.", "另有 {count} 个业务验收项见 evidence.json。"),
    "unit.ms": ("{value} ms", "{value} 毫秒"),
    "unit.share": ("{value} ({percent} %)", "{value}（{percent}%）"),
    "prov.computed": ("computed", "门禁计算"),
    "prov.measured": ("measured", "门禁测量"),
    "prov.measured_in_workload": ("measured inside the workload (the code under test can overwrite these samples)",
                                  "在工作负载内测量（被测代码可改写这些采样）"),
    "prov.self_reported": ("self-reported, not verified", "模型自报，未经验证"),
    # operations
    "ops.source": ("Source", "数据来源"),
    "ops.memory": ("Memory high-water mark", "内存峰值"),
    "ops.util": ("Utilisation mean / max", "利用率 均值/峰值"),
    "ops.samples": ("Samples (interval)", "采样数（间隔）"),
    "ops.rss": ("Peak RSS of the run", "进程峰值 RSS"),
    "ops.mib": ("{value} MiB", "{value} MiB"),
    "ops.pct": ("{mean} % / {max} %", "{mean}% / {max}%"),
    "ops.count": ("{count} ({interval} s)", "{count}（{interval} 秒）"),
    "ops.unavailable": ("not available: {why}", "不可用：{why}"),
    "ops.not_read": ("not read", "未读取"),
    "ops.scope": ("What the numbers cover: {scope}", "数据范围：{scope}"),
    "ops.none": ("No model run in this run.", "本次运行没有模型运行。"),
    "ops.queue": ("Queue wait (submitted → admitted → placed → started)", "排队等待（提交 → 准入 → 调度 → 启动）"),
    "ops.submitted": ("Submitted", "提交"),
    "ops.admitted": ("Admitted", "准入"),
    "ops.placed": ("Placed", "调度完成"),
    "ops.started": ("Started", "启动"),
    "ops.wait": ("Wait", "等待时长"),
    "ops.restarts": ("Restarts", "重启次数"),
    "ops.not_recorded": ("not recorded", "未记录"),
    "ops.no_queue": ("No workload was queued or placed on this backend: queue wait does not apply ({backends}).",
                     "此后端未进行排队或调度，排队等待不适用（{backends}）。"),
    "ops.seconds": ("{value} s", "{value} 秒"),
    "ops.subsecond": ("< 1 s (stamped in whole seconds)", "< 1 秒（时间戳精度为整秒）"),
    "chart.memory": ("Memory used over the run: {item}, {device} ({source}, every {interval} s)",
                     "运行期间内存占用：{item}，{device}（{source}，每 {interval} 秒采样）"),
    "chart.util": ("Utilisation over the run: {item}, {device} ({source}, every {interval} s)",
                   "运行期间利用率：{item}，{device}（{source}，每 {interval} 秒采样）"),
    "chart.memory_unit": ("{value} MiB", "{value} MiB"),
    "chart.util_unit": ("{value} %", "{value}%"),
    "chart.seconds": ("{value} s", "{value} 秒"),
    "chart.more": ("{count} more chart(s): their series are in evidence.json.",
                   "另有 {count} 张图，其序列数据见 evidence.json。"),
    "chart.queue": ("Queue and placement per pool (wait: submitted → placed; start: placed → started)",
                    "各资源池排队与调度（等待：提交 → 调度完成；启动：调度完成 → 启动）"),
    "chart.queue_summary": ("Pool {pool}: {count} workload(s); wait {wait}; start {start}; {unknown} span(s) "
                            "without a recorded time",
                            "资源池 {pool}：{count} 个工作负载；等待 {wait}；启动 {start}；"
                            "{unknown} 个时段缺少记录时间"),
    "chart.span": ("{count} measured, p50 {p50} s, p95 {p95} s, max {max} s",
                   "测得 {count} 个，p50 {p50} 秒，p95 {p95} 秒，最长 {max} 秒"),
    "chart.wait_s": ("wait {stat}", "等待 {stat}"),
    "chart.start_s": ("start {stat}", "启动 {stat}"),
    "cap.title": ("Pool capacity at discovery (allocatable vs requested by the pods on each node)",
                  "发现阶段的资源池容量（各节点可分配量与已有 Pod 请求量）"),
    "cap.pool": ("Pool", "资源池"),
    "cap.node": ("Node", "节点"),
    "cap.resource": ("Resource", "资源"),
    "cap.capacity": ("Capacity", "总量"),
    "cap.allocatable": ("Allocatable", "可分配"),
    "cap.requested": ("Requested by pods", "Pod 已请求"),
    "cap.free": ("Free", "空闲"),
    "cap.withheld": ("Capacity − allocatable", "总量 − 可分配"),
    "cap.note": ("Capacity − allocatable is, for a device, what its device plugin reported unhealthy; for cpu "
                 "and memory, the node's reservations. Requested: the effective requests of the pods bound to "
                 "the node and not ended, when discovery listed them.",
                 "“总量 − 可分配”：对设备而言是设备插件报告为不健康的设备；对 CPU 与内存而言是节点预留。"
                 "“Pod 已请求”：发现阶段绑定在该节点且未结束的 Pod 的有效请求量之和。"),
    "cap.unavailable": ("Pool {pool}: the pods' requests were not read ({why}).",
                        "资源池 {pool}：未能读取 Pod 请求量（{why}）。"),
    "cap.gib": ("{value} GiB", "{value} GiB"),
    "cap.none": ("No node pool was listed in this run (the engine has no scheduler: {backends}).",
                 "本次运行未列出节点资源池（该后端没有调度器：{backends}）。"),
    "cap.idle": ("Devices held without use: {item}, {device} (utilisation 0 % in all {samples} samples)",
                 "占用但未使用的设备：{item}，{device}（{samples} 次采样利用率均为 0%）"),
    "ops.more": ("{count} more row(s) are in evidence.json.", "另有 {count} 行见 evidence.json。"),
    "rsv.title": ("Reserved inference under a training burst (seconds since the burst started)",
                  "训练突发下的推理预留容量（自突发开始的秒数）"),
    "rsv.setup": ("serving at {cls}, {replicas} replica(s), floor {floor}; burst of {pods} pod(s) at {burst_cls}",
                  "推理服务优先级 {cls}，{replicas} 个副本，下限 {floor}；训练突发 {pods} 个 Pod，优先级 {burst_cls}"),
    "rsv.no_class": ("no PriorityClass", "无 PriorityClass"),
    "rsv.phase": ("Phase", "阶段"),
    "rsv.span": ("Window (s)", "时间窗（秒）"),
    "rsv.ready": ("Serving pods Ready (min)", "就绪推理 Pod（最少）"),
    "rsv.answered": ("Answered / sent", "成功 / 发送"),
    "rsv.p95": ("p95 (ms)", "p95（毫秒）"),
    "rsv.at": ("At (s)", "时刻（秒）"),
    "rsv.pod": ("Pod", "Pod"),
    "rsv.role": ("Role", "角色"),
    "rsv.what": ("What happened", "事件"),
    "rsv.detail": ("The cluster's words", "集群原文"),
    # phases and scenarios
    "phase.catalogue": ("1. Resource catalogue usable", "1. 资源目录可用"),
    "phase.placement": ("2. Tasks land in the right pool, Pending explained, no boundary crossed",
                        "2. 任务落入正确的资源池，Pending 有解释，不越界"),
    "phase.evidence": ("3. Reproducible evidence chain", "3. 证据链可复现"),
    "phase.expansion": ("4. Expansion breaks nothing", "4. 扩容不影响既有能力"),
    "scn.new_resource": ("New resource admitted", "新资源接入"),
    "scn.training": ("Training / fine-tune under quota", "配额内的训练/微调"),
    "scn.inference": ("Inference service: version, entry, permission, observability, rollback",
                      "推理服务：版本、入口、权限、可观测性、回滚"),
    "scn.usage": ("Usage attributed by project, task and model", "按项目、任务、模型归属用量"),
    "cov.covered": ("covered", "已覆盖"),
    "cov.partial": ("partly covered", "部分覆盖"),
    "cov.not_covered": ("not covered", "未覆盖"),
    "cov.against": ("contradicted", "存在反例"),
    "cov.state": ("State", "状态"),
    "cov.what": ("What", "内容"),
    "cov.items": ("Proven by", "证明项"),
    "cov.detail": ("Notes", "说明"),
    "d.catalogue": ("{passed} of {total} resource(s) discovered healthy", "{total} 个资源中 {passed} 个发现健康"),
    "d.placement": ("{placed} placement(s) proven, {explained} Pending reason(s) explained, {unexplained} unexplained",
                    "{placed} 次调度得到证明，{explained} 个 Pending 原因得到解释，{unexplained} 个未得到解释"),
    "d.placement_none": ("no placement was attempted on this backend ({backends})", "此后端（{backends}）不进行调度"),
    "d.evidence": ("run signature: {signature}; model/dataset digests checked on {digests} item(s); image digests "
                   "recorded on {images} item(s)",
                   "运行签名：{signature}；{digests} 个验证项校验了模型/数据集摘要；{images} 个验证项记录了镜像摘要"),
    "d.signed": ("verified", "已验证"),
    "d.signed_unverified": ("present, NOT verified", "有，未验证"),
    "d.unsigned": ("absent", "无"),
    "d.expansion": ("against baseline {run}: {regressions} regression(s), {new} new failure(s)",
                    "与基线 {run} 相比：{regressions} 个回归，{new} 个新增失败"),
    "d.no_baseline": ("no baseline was compared", "未与基线比较"),
    "d.new_resource": ("{count} resource(s) with discovery, scheduling and startup proven",
                       "{count} 个资源的发现、调度与启动均得到证明"),
    "d.new_resource_partial": ("{count} resource(s) discovered and started; scheduling not proven",
                               "{count} 个资源完成发现与启动，但调度未得到证明"),
    "d.training": ("workloads admitted through queue(s) {queues}; a training run is not a layer of the gate",
                   "工作负载经由队列 {queues} 准入；训练任务本身不属于门禁的验证层"),
    "d.training_none": ("no workload went through a queue with quota (Kueue ClusterQueue, Volcano queue); no "
                        "training job is in the matrix",
                        "没有工作负载经过带配额的队列（Kueue ClusterQueue、Volcano 队列），矩阵中也没有训练任务"),
    "d.inference_none": ("no served model in the matrix", "矩阵中没有推理服务"),
    "d.usage": ("{count} attribution probe(s) passed: each account counting the requests rose by exactly the "
                "request and was released; {samples} model run(s) carry device samples",
                "{count} 个用量归属探针通过：每个计量账户按请求量准确增加并在结束后释放；"
                "{samples} 次模型运行带有设备采样"),
    "d.usage_none": ("no attribution probe ran, so attribution by project, task and model is not proven ({samples} "
                     "model run(s) carry device samples, which say what was used, not who it is counted to)",
                     "未运行用量归属探针，按项目、任务、模型归属用量未得到证明（{samples} 次模型运行带有设备采样，"
                     "它们只说明用了多少，不说明计入谁的账户）"),
    "d.usage_against": ("{count} attribution probe(s) failed: usage is not counted to the tenant that held it",
                        "{count} 个用量归属探针失败：用量未计入实际占用的租户"),
    "d.boundary": ("no boundary crossed: {count} tenant-isolation probe(s) refused",
                   "未越界：{count} 个租户隔离探针均被拒绝"),
    "d.boundary_none": ("no boundary crossed: not proven (no tenant-isolation probe ran)",
                        "未越界：未得到证明（未运行租户隔离探针）"),
    "d.boundary_crossed": ("boundary crossed: {count} tenant-isolation probe(s) failed",
                           "发生越界：{count} 个租户隔离探针失败"),
    "aspect.version": ("version", "版本"),
    "aspect.entry": ("entry", "入口"),
    "aspect.permission": ("permission", "权限"),
    "aspect.observability": ("observability", "可观测性"),
    "aspect.rollback": ("rollback", "回滚"),
    # untested
    "un.reason": ("Reason", "原因"),
    "un.count": ("Items", "项数"),
    "un.examples": ("Examples", "示例"),
    "un.who": ("Who can close it", "由谁关闭"),
    "un.how": ("How", "关闭方式"),
    "un.not_applicable": ("{layer}: the {backends} backend cannot prove it", "{layer}：{backends} 后端无法证明"),
    "un.blocked": ("blocked by {root}", "被 {root} 阻断"),
    "un.excluded": ("excluded by the matrix: {reason}", "矩阵排除：{reason}"),
    "un.deselected": ("deselected: {reason}", "未选中：{reason}"),
    "un.not_run": ("not run: {reason}", "未运行：{reason}"),
    "un.skipped": ("skipped: {reason}", "已跳过：{reason}"),
    "how.not_applicable": ("run the matrix on a backend that proves {layer} (docker, kubernetes)",
                           "在能够证明{layer}的后端（docker、kubernetes）上运行该矩阵"),
    "how.blocked": ("fix the root failure ({category}), then run again", "修复根因失败（{category}）后重新运行"),
    "how.excluded": ("remove or narrow the exclude rule in the matrix", "在矩阵中删除或收窄该排除规则"),
    "how.deselected": ("run again without the selection (profile, -k/-m, shard)",
                       "去掉筛选条件（档位、-k/-m、分片）重新运行"),
    "how.not_run": ("run again to completion", "重新完整运行"),
    "how.skipped": ("remove the skip and run again", "去掉跳过条件后重新运行"),
    "who.runner": ("whoever runs the gate", "门禁执行人"),
    "who.matrix": ("the matrix maintainers", "矩阵维护方"),
    "un.never": ("Never covered by a pass in {matrix}: {dimension}: {values}",
                 "{matrix} 中没有任何通过项覆盖：{dimension}：{values}"),
    "un.part": ("{layer}: {part} not proven", "{layer}：{part}未得到证明"),
    "un.none": ("Nothing untested: every planned item ran and passed or failed.",
                "无未测试范围：所有计划项均已运行并得出结论。"),
    "un.more": ("… and {count} more", "……另有 {count} 项"),
    "dim.resource": ("resource", "资源"),
    "dim.image": ("image", "镜像"),
    "dim.model": ("model", "模型"),
    "dim.dataset": ("dataset", "数据集"),
    "dim.resource_without_business_pass": ("resource without a business pass", "没有业务验收通过项的资源"),
    # reproduce
    "rep.command": ("Command", "运行命令"),
    "rep.cwd": ("Run from {rootdir}, with the matrix file whose sha256 is given here (a copy is in the bundle's "
                "inputs/).", "在 {rootdir} 下运行，使用此处给出 sha256 的矩阵文件（证据包 inputs/ 中有副本）。"),
    "rep.verify": ("Verify the bundle", "校验证据包"),
    "rep.render": ("Render this dossier", "生成本报告"),
    "rep.matrix": ("Matrix digest", "矩阵摘要"),
    "rep.tool": ("Tool version", "工具版本"),
    "rep.git": ("Source commit", "代码提交"),
    "rep.env": ("Environment", "运行环境"),
    "rep.env_value": ("host {host}; Python {python}; pytest {pytest}", "主机 {host}；Python {python}；pytest {pytest}"),
    "rep.not_recorded": ("not recorded", "未记录"),
    # heat map
    "heat.legend": ("Each cell: one resource × image; its five sub-cells are the layers (D S U M B); a model/"
                    "business sub-cell counts every model@dataset. Hover a cell for the failure reason; printed "
                    "reasons are numbered below.",
                    "每个单元格对应一个资源 × 镜像；五个子格依次为五个层级（D S U M B），模型运行/业务验收子格汇总所有"
                    "模型@数据集组合。鼠标悬停可查看失败原因，打印版的原因按编号列在下方。"),
    "heat.reasons": ("Failure reasons", "失败原因"),
}
"""Key → (English, Chinese)."""

STATUS: dict[str, tuple[str, str]] = {
    "passed": ("passed", "通过"), "failed": ("failed", "失败"), "error": ("error", "执行异常"),
    "blocked": ("blocked", "被阻断"), "not_applicable": ("not applicable", "不适用"), "skipped": ("skipped", "已跳过"),
    "excluded": ("excluded", "已排除"), "deselected": ("deselected", "未选中"), "not_run": ("not run", "未运行"),
}
"""Status → (English, Chinese)."""

TEAMS: dict[str, tuple[str, str]] = {
    "infrastructure": ("infrastructure", "基础设施团队"), "platform": ("platform", "平台团队"),
    "algorithm": ("algorithm", "算法团队"), "business": ("business", "业务团队"),
}
"""The four owner categories' names; a matrix's own team names are shown as written."""


class Text:
    """The catalogue in one language: ``t("key", **fields)``, ``status(s)``, ``layer(l)``, ``team(name)``."""

    def __init__(self, lang: Lang) -> None:
        if lang not in LANGS:
            raise ValueError(f"unknown language {lang!r}; choose from {', '.join(LANGS)}")
        self.lang = lang
        self._i = LANGS.index(lang)

    def __call__(self, key: str, **fields: Any) -> str:
        """The text of ``key`` with ``fields`` filled in. Raises KeyError for a key not in the catalogue."""
        return MESSAGES[key][self._i].format(**fields) if fields else MESSAGES[key][self._i]

    def join(self, parts: list[str] | tuple[str, ...]) -> str:
        """``parts`` joined as a list is written in this language (``a, b`` / ``a、b``)."""
        return self("list.sep").join(parts)

    def counts(self, counts: dict[str, int]) -> str:
        """Status counts in words, largest first (``4 passed, 1 failed`` / ``通过 4 项、失败 1 项``)."""
        return self.join([self("count.status", count=n, status=self.status(s))
                          for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))])

    def status(self, status: str) -> str:
        """A status in words (unknown statuses as they are)."""
        return STATUS[status][self._i] if status in STATUS else status

    def layer(self, layer: str) -> str:
        """A layer's name in words, as a heading (``Model execution`` / ``模型运行``)."""
        return self(f"layer.{layer}") if f"layer.{layer}" in MESSAGES else layer

    def term(self, layer: str) -> str:
        """A layer's name inside a sentence (``model execution`` / ``模型运行``)."""
        name = self.layer(layer)
        return name[:1].lower() + name[1:] if self.lang == "en" else name

    def team(self, name: str) -> str:
        """A team: the owner categories translated, a matrix's own team names as written."""
        return TEAMS[name][self._i] if name in TEAMS else name
