#!/usr/bin/env python3
"""Read what nvml-mock's chart hands its pod from `helm template` output.

    helm template ... | render-chart.py CONFIG_OUT > ENV_FILE

Writes the ConfigMap's config.yaml (the profile as the pod sees it at
/etc/nvml-mock/config.yaml) to CONFIG_OUT and prints the DaemonSet container's
literal environment as NAME=value lines, so that setup.sh can run outside the
cluster with exactly the chart's inputs.
"""

import sys

import yaml


def main() -> int:
    config_out = sys.argv[1]
    config = None
    env: list[str] = []
    for doc in yaml.safe_load_all(sys.stdin):
        if not doc:
            continue
        if doc["kind"] == "ConfigMap" and "config.yaml" in doc.get("data", {}):
            config = doc["data"]["config.yaml"]
        if doc["kind"] == "DaemonSet" and doc["metadata"]["name"].endswith("nvml-mock"):
            container = doc["spec"]["template"]["spec"]["containers"][0]
            env = [f"{e['name']}={e['value']}" for e in container.get("env", []) if "value" in e]
    if config is None or not env:
        print("render-chart.py: no nvml-mock ConfigMap or DaemonSet in the input", file=sys.stderr)
        return 1
    with open(config_out, "w") as f:
        f.write(config)
    print("\n".join(env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
