"""What a command points at: a cluster, and optionally a pipeline from the config.

Every command takes either ``--config/--pipeline`` or explicit ``--bootstrap``/``--topic``/``--group``;
explicit flags win over the config so a user can narrow a pipeline down to one topic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from eosctl import sandboxstate
from eosctl.config import (
    BOOTSTRAP_FORM,
    SANDBOX,
    Cluster,
    Config,
    Pipeline,
    bootstrap_problem,
    load_config,
    normalize_bootstrap,
)
from eosctl.errors import ConfigError


@dataclass(frozen=True)
class Target:
    cluster: Cluster
    pipeline: Pipeline | None
    config: Config | None
    topics: tuple[str, ...]
    group: str | None
    # A pipeline audited hop by hop has no group of its own: its hops' groups, so that lag and the
    # exporter's series cover them and not every group of the cluster.
    groups: tuple[str, ...] = ()
    # The cluster is the sandbox (`bootstrap_servers = "sandbox"`, or no cluster given): a long-lived
    # reader follows it to the port of its next `eosctl sandbox up` (eosctl.live).
    sandbox: bool = False

    def lag_groups(self) -> list[str]:
        """The consumer groups whose lag is this target's (empty: every group on its topics)."""
        return [self.group] if self.group else list(self.groups)


def resolve(
    config: str | None,
    pipeline: str | None,
    bootstrap: str | None,
    topics: tuple[str, ...] = (),
    group: str | None = None,
    need_topics: bool = False,
) -> Target:
    if bootstrap is not None:
        bootstrap = check_bootstrap(bootstrap)
    cfg = load_config(config) if config else None
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
        cluster = replace(cluster, bootstrap_servers=_sandbox_bootstrap(config, cluster.name))
    hops = [cfg.pipelines[h] for h in pipe.hops] if cfg and pipe and pipe.hops else []
    topics = tuple(topics) or (pipe.source_topics if pipe else ()) or tuple(
        dict.fromkeys(t for h in hops for t in h.source_topics))
    group = group or (pipe.group if pipe else None)
    groups = () if group else tuple(dict.fromkeys(h.group for h in hops if h.group))
    if pipe and pipe.sink and pipe.sink.kafka_topic and pipe.sink.kafka_cluster is None:
        hop_cluster = cluster
        if cfg and pipe.sink.cluster and pipe.sink.cluster != cluster.name:
            hop_cluster = cfg.clusters[pipe.sink.cluster]
            if hop_cluster.bootstrap_servers == SANDBOX:
                hop_bootstrap = _sandbox_bootstrap(config, hop_cluster.name)
                hop_cluster = replace(hop_cluster, bootstrap_servers=hop_bootstrap)
        pipe = replace(pipe, sink=replace(pipe.sink, kafka_cluster=hop_cluster, stage_group=group,
                                          stage_cluster=cluster, stage_topics=tuple(topics)))
    if need_topics and not topics:
        raise ConfigError("no topic given: pass --topic NAME or --config FILE --pipeline NAME")
    return Target(cluster=cluster, pipeline=pipe, config=cfg, topics=topics, group=group, groups=groups,
                  sandbox=on_sandbox)


def check_bootstrap(bootstrap: str, flag: str = "--bootstrap") -> str:
    """The --bootstrap value, normalized; ConfigError (one line) unless it is HOST:PORT[,HOST:PORT...]."""
    problem = bootstrap_problem(bootstrap)
    if problem:
        raise ConfigError(f"{flag} {bootstrap!r}: {problem}; {BOOTSTRAP_FORM}")
    return normalize_bootstrap(bootstrap)


def _sandbox_bootstrap(config: str | None, cluster: str) -> str:
    """Where the sandbox broker listens, for a config cluster that says bootstrap_servers = "sandbox"."""
    state = sandboxstate.status(sandboxstate.state_dir())
    if state is None:
        raise ConfigError(f"{config}: clusters.{cluster}.bootstrap_servers is \"sandbox\", but the sandbox "
                          "is not running; start it with `eosctl sandbox up`")
    return state.bootstrap
