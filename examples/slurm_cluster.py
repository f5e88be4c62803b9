"""Grade a course on a SLURM cluster: Dask workers as SLURM jobs (dask-jobqueue), then ``grade``.

Run it on a machine that can submit SLURM jobs (a login node) and sees the course folder::

    pip install dask-jobqueue          # optional: not a dependency of rbtutor
    export RBTUTOR_GRADEBOOK=postgresql+psycopg://grader:secret@db.example.org/rbtutor
    python examples/slurm_cluster.py /shared/courses/rbtutor --jobs 10 --print-script
    python examples/slurm_cluster.py /shared/courses/rbtutor --jobs 10

The scheduler runs in this process; every SLURM job starts WORKERS_PER_JOB worker processes,
one thread each (a worker grades one notebook at a time, and the kernel it starts uses the
other core of its pair). The job script loads the same virtual environment as this process and
passes on ``RBTUTOR_GRADEBOOK``, so that the workers write to the same gradebook; the course
folder must be mounted at the same path on the compute nodes. Change QUEUE, ACCOUNT and the
sizes below for your site.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

QUEUE = "compute"  # SLURM partition (sbatch -p)
ACCOUNT = None  # SLURM account (sbatch -A), if your site needs one
WORKERS_PER_JOB = 8  # worker processes per job, one thread each
MEMORY_PER_JOB = "32GB"  # about 4 GB per worker: the kernel may use up to 4 GiB of address space
WALLTIME = "02:00:00"


def slurm_cluster():
    """A ``dask_jobqueue.SLURMCluster`` whose workers can grade (see rbtutor.course.cluster)."""
    from dask_jobqueue import SLURMCluster

    environment = [f"source {shlex.quote(str(Path(sys.prefix) / 'bin' / 'activate'))}"]
    if os.environ.get("RBTUTOR_GRADEBOOK"):
        environment.append(f"export RBTUTOR_GRADEBOOK={shlex.quote(os.environ['RBTUTOR_GRADEBOOK'])}")
    cluster = SLURMCluster(
        queue=QUEUE,
        account=ACCOUNT,
        cores=WORKERS_PER_JOB,  # cores == processes: one thread per worker
        processes=WORKERS_PER_JOB,
        memory=MEMORY_PER_JOB,
        walltime=WALLTIME,
        # each worker also runs a sandboxed kernel: book two CPUs per worker
        job_cpu=2 * WORKERS_PER_JOB,
        job_script_prologue=environment,
        # leave before the walltime, so that the scheduler moves the work away in time
        worker_extra_args=["--lifetime", "115m", "--lifetime-stagger", "4m"],
        local_directory="$TMPDIR",
    )
    return cluster


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("course", help="the course folder (the same path on every compute node)")
    parser.add_argument("--jobs", type=int, default=4, help="SLURM jobs of workers to start")
    parser.add_argument("--print-script", action="store_true", help="print the job script and stop")
    args = parser.parse_args(argv)
    cluster = slurm_cluster()
    try:
        if args.print_script:
            print(cluster.job_script())
            return 0
        cluster.scale(jobs=args.jobs)
        from rbtutor.course import CourseLayout
        from rbtutor.course.cluster import grade_on_cluster

        # SLURM jobs may queue: wait for the first one before the workers are checked
        return grade_on_cluster(CourseLayout(Path(args.course)), cluster.scheduler_address, worker_timeout=3600)
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
