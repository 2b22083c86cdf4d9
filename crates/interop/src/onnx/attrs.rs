//! Typed access to a node's attributes, with ONNX's defaults supplied by the caller and errors
//! that name the node.

use super::proto::{attribute_proto::AttributeType, AttributeProto, NodeProto};
use super::tensor::{from_proto, Const};
use crate::{InteropError, Result};

/// A node's attributes.
pub(crate) struct Attrs<'a> {
    node: &'a NodeProto,
}

impl<'a> Attrs<'a> {
    pub fn new(node: &'a NodeProto) -> Attrs<'a> {
        Attrs { node }
    }

    fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    fn err(&self, name: &str, want: &str) -> InteropError {
        InteropError::node(&self.node.name, &self.node.op_type, format!("attribute `{name}` is not {want}"))
    }

    fn kind(a: &AttributeProto) -> Option<AttributeType> {
        AttributeType::try_from(a.r#type).ok()
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn int(&self, name: &str, default: i64) -> Result<i64> {
        match self.get(name) {
            None => Ok(default),
            Some(a) if matches!(Self::kind(a), Some(AttributeType::Int) | Some(AttributeType::Undefined)) => Ok(a.i),
            Some(_) => Err(self.err(name, "an integer")),
        }
    }

    pub fn float(&self, name: &str, default: f32) -> Result<f32> {
        match self.get(name) {
            None => Ok(default),
            Some(a) if matches!(Self::kind(a), Some(AttributeType::Float) | Some(AttributeType::Undefined)) => Ok(a.f),
            Some(a) if Self::kind(a) == Some(AttributeType::Int) => Ok(a.i as f32),
            Some(_) => Err(self.err(name, "a float")),
        }
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.get(name) {
            None => Ok(None),
            Some(a) if matches!(Self::kind(a), Some(AttributeType::Ints) | Some(AttributeType::Undefined)) => Ok(Some(a.ints.clone())),
            Some(_) => Err(self.err(name, "a list of integers")),
        }
    }

    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        match self.get(name) {
            None => Ok(None),
            Some(a) if matches!(Self::kind(a), Some(AttributeType::Floats) | Some(AttributeType::Undefined)) => Ok(Some(a.floats.clone())),
            Some(_) => Err(self.err(name, "a list of floats")),
        }
    }

    pub fn string(&self, name: &str, default: &str) -> Result<String> {
        match self.get(name) {
            None => Ok(default.to_string()),
            Some(a) if matches!(Self::kind(a), Some(AttributeType::String) | Some(AttributeType::Undefined)) => {
                String::from_utf8(a.s.clone()).map_err(|_| self.err(name, "UTF-8 text"))
            }
            Some(_) => Err(self.err(name, "a string")),
        }
    }

    pub fn tensor(&self, name: &str) -> Result<Option<Const>> {
        match self.get(name) {
            None => Ok(None),
            Some(a) => match &a.t {
                Some(t) => Ok(Some(from_proto(t)?)),
                None => Err(self.err(name, "a tensor")),
            },
        }
    }
}
