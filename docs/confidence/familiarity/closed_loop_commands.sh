#!/bin/bash
cd /work/main
export PYTHONPATH=/work/wt_runs MUJOCO_GL=egl
py=/work/main/.venv/bin/python

ev() { local name=$1 n=$2 limit=$3; shift 3
  $py -m para_ros.dds_env -- $py -m para_ros.commands.sim eval --lockstep --out runs/fam_eval/$name --episodes $n --seed 200000 \
    --no-videos --time-limit $limit --node-param chunk_executor:lockstep_latency_s:=0.2 \
    --node-param chunk_executor:confidence_supervisor:=true --checkpoint runs/fam_eval/ckpt --continue "$@" > runs/fam_eval/$name.log 2>&1
}
ev blue_cube 20 12 --cube-rgba 0.15 0.3 0.85 1
ev dark_pad 10 30 --node-param "sim_node:target_rgba:=[0.2,0.2,0.2,1.0]"
ev nominal 20 30
echo done > runs/fam_eval/chain.done
