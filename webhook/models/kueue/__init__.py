"""Kueue as the checks read it (kubernetes-sigs/kueue v0.17.0): which queue a job goes to and its
LocalQueue and ClusterQueue (queue), the cohort tree's quota arithmetic (cohort), and why and behind whom
a job waits (wait). The Kueue checks (webhook/checks/kueue/) and the Controllers check read them.
"""
