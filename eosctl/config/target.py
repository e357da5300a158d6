"""What a command points at: a cluster, and optionally a pipeline from the config.

Every command takes either ``--config/--pipeline`` or explicit ``--bootstrap``/``--topic``/``--group``;
explicit flags win over the config so a user can narrow a pipeline down to one topic.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from eosctl.base.errors import ConfigError
from eosctl.config import sandboxstate
from eosctl.config.file import load_config
from eosctl.config.model import SANDBOX, Cluster, Config, Pipeline
from eosctl.config.values import BOOTSTRAP_FORM, bootstrap_problem, normalize_bootstrap


@dataclass(frozen=True)
class Target:
    cluster: Cluster
    pipeline: Pipeline | None
    config: Config | None
    topics: tuple[str, ...]
    group: str | None
    # A pipeline audited hop by hop has no topics or group of its own: its hops' (see scope()). ``groups``
    # is every group whose lag and offsets are the pipeline's; ``outputs`` the topics it writes.
    groups: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    txn_prefixes: tuple[str, ...] = ()
    # Each group's own topics where the groups read different ones (a pipeline's hops).
    group_topics: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The address the command was given (--bootstrap), which every other pipeline of the config resolved
    # for the same command is pointed at too (a hop, the stage upstream of the audited topic).
    bootstrap: str | None = None

    @property
    def watched(self) -> tuple[str, ...]:
        """Every topic the pipeline reads or writes: where its transactions and producers are."""
        return tuple(dict.fromkeys([*self.topics, *self.outputs]))

    # The cluster is the sandbox (`bootstrap_servers = "sandbox"`, or no cluster given): a long-lived
    # reader follows it to the port of its next `eosctl sandbox up` (eosctl.inspection.live).
    sandbox: bool = False

    def lag_groups(self) -> list[str]:
        """The consumer groups whose lag is this target's (empty: every group on its topics)."""
        return [self.group] if self.group else list(self.groups)

    def args(self) -> str:
        """The options that point another eosctl command at this target, for hints printed to be copied:
        the config file (absolute, so the hint works from any directory) and pipeline, else the address."""
        if self.config is not None and self.pipeline is not None:
            return f"-c {shlex.quote(str(self.config.path.resolve()))} -p {shlex.quote(self.pipeline.name)}"
        return f"--bootstrap {shlex.quote(self.cluster.bootstrap_servers)}"

    @property
    def txn_id_prefixes(self) -> tuple[str, ...]:
        """The pipeline's transactional id prefixes; empty: every id."""
        return self.txn_prefixes or ((self.pipeline.transactional_id_prefix,)
                                     if self.pipeline and self.pipeline.transactional_id_prefix else ())

    def owns_txn(self, transactional_id: str | None) -> bool:
        """Whether a transactional id is the pipeline's (every id when the pipeline names no prefix)."""
        prefixes = self.txn_id_prefixes
        return not prefixes or any((transactional_id or "").startswith(p) for p in prefixes)


def resolve(
    config: str | Path | Config | None,
    pipeline: str | None,
    bootstrap: str | None,
    topics: tuple[str, ...] = (),
    group: str | None = None,
    need_topics: bool = False,
) -> Target:
    """What the command points at. ``config``: the config file, or the Config a command read already (read
    once per command, then handed down: each hop and stage of it resolved from the same reading)."""
    if bootstrap is not None:
        bootstrap = check_bootstrap(bootstrap)
    if isinstance(config, Config):
        cfg: Config | None = config
        config = str(config.path)
    else:
        cfg = load_config(config) if config else None
        config = str(config) if config else None
    pipe = cfg.pipeline(pipeline) if cfg else None
    if pipeline and not cfg:
        raise ConfigError("--pipeline needs --config FILE (or set EOSCTL_CONFIG)")
    found_sandbox = False
    if bootstrap:
        cluster = Cluster(name="cli", bootstrap_servers=bootstrap)
        if cfg and pipe:
            # Keep the config's security settings, only the address changes.
            cluster = replace(cfg.cluster_of(pipe), bootstrap_servers=bootstrap)
    elif cfg and pipe:
        cluster = cfg.cluster_of(pipe)
    elif cfg and len(cfg.clusters) == 1:
        cluster = next(iter(cfg.clusters.values()))
    else:
        state = sandboxstate.status(sandboxstate.state_dir())
        if state is None:
            raise ConfigError(
                "no cluster given: pass --bootstrap HOST:PORT or --config FILE --pipeline NAME "
                "(or start the sandbox with `eosctl sandbox up`)"
            )
        cluster = Cluster(name="sandbox", bootstrap_servers=state.bootstrap)
        found_sandbox = True
    on_sandbox = cluster.bootstrap_servers == SANDBOX or found_sandbox
    if cluster.bootstrap_servers == SANDBOX:
        cluster = replace(cluster, bootstrap_servers=_sandbox_bootstrap(config, cluster))
    hops_scope = scope(cfg, pipe) if cfg and pipe and pipe.hops else None
    explicit_topics = bool(topics)
    topics = tuple(topics) or (pipe.source_topics if pipe else ())
    group = group or (pipe.group if pipe else None)
    outputs: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    group_topics: tuple = ()
    if hops_scope is not None:
        hop_topics, outputs, groups, prefixes, group_topics = hops_scope
        topics = topics if explicit_topics else hop_topics
        groups = () if group else groups
    elif pipe:
        outputs = tuple(t for t in _writes(pipe) if t not in topics)
    if pipe and pipe.sink and pipe.sink.kafka_topic and pipe.sink.kafka_cluster is None:
        hop_cluster = cluster
        if cfg and pipe.sink.cluster and pipe.sink.cluster != cluster.name:
            hop_cluster = cfg.clusters[pipe.sink.cluster]
            if hop_cluster.bootstrap_servers == SANDBOX:
                hop_bootstrap = _sandbox_bootstrap(config, hop_cluster)
                hop_cluster = replace(hop_cluster, bootstrap_servers=hop_bootstrap)
        pipe = replace(pipe, sink=replace(pipe.sink, kafka_cluster=hop_cluster, stage_group=group,
                                          stage_cluster=cluster, stage_topics=tuple(topics)))
    if need_topics and not topics:
        raise ConfigError("no topic given: pass --topic NAME or --config FILE --pipeline NAME")
    return Target(cluster=cluster, pipeline=pipe, config=cfg, topics=topics, group=group, groups=groups,
                  outputs=outputs, txn_prefixes=prefixes, group_topics=() if group else group_topics,
                  sandbox=on_sandbox, bootstrap=bootstrap)


def one_topic(target: Target) -> str:
    """The target's one topic, for a command that reads one; several (a pipeline's, or its hops') are one
    line naming each choice as the option that picks it."""
    if len(target.topics) > 1:
        choices = " or ".join(f"--topic {shlex.quote(t)}" for t in target.topics)
        what = "its hops read" if target.pipeline and target.pipeline.hops else "the pipeline has"
        raise ConfigError(f"{what} several topics ({', '.join(target.topics)}); choose one: {choices}")
    return target.topics[0]


def scope(cfg: Config, pipe: Pipeline) -> tuple:
    """A pipeline audited hop by hop, seen as one: its hops' input topics, output topics (an output topic or
    a Kafka topic a hop writes), groups and transactional id prefixes, in hop order. Never "every topic":
    the pipeline is exactly what its hops read and write."""
    hops = [cfg.pipelines[h] for h in pipe.hops]
    per_group: dict[str, tuple[str, ...]] = {}
    for h in hops:
        if h.group:
            per_group[h.group] = tuple(dict.fromkeys([*per_group.get(h.group, ()), *h.source_topics]))
    topics = tuple(dict.fromkeys(t for h in hops for t in h.source_topics))
    outputs = tuple(dict.fromkeys(t for h in hops for t in _writes(h) if t not in topics))
    groups = tuple(dict.fromkeys(h.group for h in hops if h.group))
    prefixes = tuple(dict.fromkeys(h.transactional_id_prefix for h in hops if h.transactional_id_prefix))
    return topics, outputs, groups, prefixes, tuple(per_group.items())


def _writes(pipe: Pipeline) -> tuple[str, ...]:
    """The topics a pipeline writes: its output topic, and the Kafka topic a stage's sink is (on the
    pipeline's cluster: a replica on another cluster is not a topic of this one)."""
    elsewhere = pipe.sink is not None and pipe.sink.cluster not in (None, pipe.cluster)
    kafka = pipe.sink.kafka_topic if pipe.sink and not elsewhere else None
    return tuple(dict.fromkeys(t for t in (pipe.output_topic, kafka) if t))


def check_bootstrap(bootstrap: str, flag: str = "--bootstrap") -> str:
    """The --bootstrap value, normalized; ConfigError (one line) unless it is HOST:PORT[,HOST:PORT...]."""
    problem = bootstrap_problem(bootstrap)
    if problem:
        raise ConfigError(f"{flag} {bootstrap!r}: {problem}; {BOOTSTRAP_FORM}")
    return normalize_bootstrap(bootstrap)


def _sandbox_bootstrap(config: str | None, cluster: Cluster) -> str:
    """Where the sandbox broker listens, for a config cluster that says bootstrap_servers = "sandbox": the
    one whose state directory the cluster names (sandbox_home), else $EOSCTL_HOME or ./.eosctl."""
    home = sandbox_home(cluster)
    state = sandboxstate.status(home)
    if state is None:
        where = home.resolve() / sandboxstate.STATE_FILE
        raise ConfigError(f"{config}: clusters.{cluster.name}.bootstrap_servers is \"sandbox\", but no "
                          f"sandbox runs from {home.resolve()} (no live broker in {where}); start it there "
                          f"with `EOSCTL_HOME={shlex.quote(str(home.resolve()))} eosctl sandbox up`, or set "
                          f"clusters.{cluster.name}.sandbox_home to the directory of the one you started")
    return state.bootstrap


def sandbox_home(cluster: Cluster) -> Path:
    """The state directory of the sandbox a cluster means (see Cluster.sandbox_home)."""
    return sandboxstate.state_dir(cluster.sandbox_home)
