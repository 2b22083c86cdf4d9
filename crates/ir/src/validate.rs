//! Structural checks every graph must pass before it is compiled or transformed.

use crate::graph::{Graph, NodeKind};
use crate::op::Op;
use crate::{IrError, ParamStore, Result};
use std::collections::HashSet;

/// Checks unique names, inputs defined before use, one output node returning at least one value,
/// arities, and (when `params` is
/// given) that every parameter a module needs is present with the right shape.
pub fn validate(graph: &Graph, params: Option<&ParamStore>) -> Result<()> {
    let mut names = HashSet::new();
    for (i, n) in graph.nodes().iter().enumerate() {
        if !names.insert(n.name.as_str()) {
            return Err(IrError::DuplicateName(n.name.clone()));
        }
        for inp in &n.inputs {
            if inp.0 >= i {
                let input = graph.nodes().get(inp.0).map(|x| x.name.clone()).unwrap_or_else(|| format!("#{}", inp.0));
                return Err(IrError::UseBeforeDef { node: n.name.clone(), input });
            }
        }
        if let Some(a) = n.op.arity() {
            if n.inputs.len() != a {
                return Err(IrError::Arity {
                    node: n.name.clone(),
                    op: n.op.mase_op().into(),
                    expected: a.to_string(),
                    got: n.inputs.len(),
                });
            }
        }
        let kind_ok = match n.op {
            Op::Input => n.kind == NodeKind::Placeholder,
            Op::Output => n.kind == NodeKind::Output,
            Op::Constant => n.kind == NodeKind::GetAttr,
            _ => !matches!(n.kind, NodeKind::Placeholder | NodeKind::Output | NodeKind::GetAttr),
        };
        if !kind_ok {
            return Err(IrError::Invalid {
                node: n.name.clone(),
                reason: format!("op {} cannot be a {} node", n.op.mase_op(), n.kind.as_str()),
            });
        }
        // A PyTorch module kept whole has the user's class, which the op names at run time.
        if n.kind == NodeKind::CallModule && n.op.module_class().is_none() && !matches!(n.op, Op::Opaque { .. }) {
            return Err(IrError::Invalid { node: n.name.clone(), reason: format!("op {} is not a module", n.op.mase_op()) });
        }
        if !n.op.param_specs().is_empty() && n.kind != NodeKind::CallModule {
            return Err(IrError::Invalid { node: n.name.clone(), reason: "ops with parameters must be call_module nodes".into() });
        }
        // Graphs from checkpoints and model files carry whatever numbers they were given.
        n.op.check_spec().map_err(|reason| IrError::Invalid { node: n.name.clone(), reason })?;
        if let Some(p) = n.op.param_specs().iter().find(|p| crate::shape::checked_numel(&p.shape).is_none()) {
            return Err(IrError::Invalid {
                node: n.name.clone(),
                reason: format!("parameter `{}` of shape {:?} has more than {} elements", p.name, p.shape, crate::shape::MAX_ELEMENTS),
            });
        }
    }
    let out = graph.node(graph.output_node()?);
    if out.inputs.is_empty() {
        return Err(IrError::Invalid { node: out.name.clone(), reason: "the output returns no value; it needs at least one".into() });
    }
    if let Some(ps) = params {
        for (name, spec) in graph.param_specs() {
            let t = ps.require(&name)?;
            if t.shape != spec.shape {
                return Err(IrError::Param { name, reason: format!("shape {:?} expected, got {:?}", spec.shape, t.shape) });
            }
        }
        for n in graph.nodes().iter().filter(|n| n.kind == NodeKind::GetAttr) {
            ps.require(&n.target)?;
        }
    }
    Ok(())
}
