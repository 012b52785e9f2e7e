# The part of slurm.conf that every test cluster of convoy's shares: root daemons, munge, no accounting, no
# cgroups, CPUs as the consumable, requeue allowed and a KillWait long enough for convoy_ps's final checkpoint.
# Sourced by tests/deploy/slurm_test.sh (one node) and tests/cluster/cluster.sh (namespace nodes), which add
# their own names, addresses, ports and paths.
convoy_slurm_policy() {
  cat <<'POLICY'
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=30
MinJobAge=600
SlurmdTimeout=60
POLICY
}
