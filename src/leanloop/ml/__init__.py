"""Machine-learning plumbing shared by trainers, provers and the server: devices, precision and
model loading (hub names, local paths and the packaged offline models), and the protocol every
tactic generator follows."""
