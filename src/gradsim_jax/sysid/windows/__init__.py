"""Windowed fits of long recordings: multiple shooting and truncated backpropagation through time (`windowed`:
`fit_windowed`, `windowed_loss`), multiple shooting's Gauss-Newton polish on every unknown (`shooting`), where
the windows start (`starts`, read off the video; `runs`: the start states' parts, the runs and their joins) and
truncated backpropagation's polish (`truncated`)."""
