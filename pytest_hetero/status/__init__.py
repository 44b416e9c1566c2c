"""Validation status: what a run proved per resource pool × task type, how long it holds, and what a
change in the cluster since a run can affect. Pure data over evidence and matrices: no engine, no
signing, no pytest (the bundle signs it, the CLI publishes it through an engine)."""
