//! QONNX quantizers (`Quant`/`IntQuant`, `BipolarQuant`, `FloatQuant`, `Trunc`), recognised by
//! their domain rather than by a table entry (`qonnx::is_quant_op`).

use super::super::util::err;
use super::super::value::{Computed, Val};
use super::super::Importer;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::Const;
use crate::qonnx;
use crate::Result;

impl Importer {
    pub(crate) fn quant(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req(n, 0)?;
        let consts: Vec<Option<Const>> = (0..n.input.len())
            .map(|k| {
                Ok(if k == 0 {
                    None
                } else if let Some(Val::Const(c)) = self.opt(n, k)? {
                    Some(c)
                } else {
                    None
                })
            })
            .collect::<Result<_>>()?;
        let refs: Vec<Option<&Const>> = consts.iter().map(Option::as_ref).collect();
        let fmt = qonnx::format_of(n, &refs)?;
        match x {
            Val::Const(c) => Ok(Val::QuantConst(c, fmt)),
            Val::Computed(d) if d.quant.is_some() => Err(err(n, "a value quantized twice in a row is not supported")),
            Val::Computed(d) => Ok(Val::Computed(Computed { quant: Some(fmt), ..d })),
            v => Err(err(n, format!("quantizing {} is not supported", v.kind()))),
        }
    }
}
