import LeanloopExample.Nat
import LeanloopExample.List
import LeanloopExample.Logic
